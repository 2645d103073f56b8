import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { pickLocale, type Locale } from '../plugins/i18n.js';
import { answerPreflight, bodyClientId, corsOnSend, headerClientId } from '../plugins/cors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { requestContext } from '../shared/request-context.js';
import { EXAMPLE, EXAMPLE_TOKENS, EXAMPLE_USER } from '../shared/examples.js';
import { json, noBody, OPTIONAL_CLIENT_AUTH, shareRouteDocs } from '../shared/responses.js';
import { SignInResult, TokenResponse } from '../shared/schemas.js';
import { hashSecret } from '../shared/ids.js';
import { isoTime } from '../shared/time.js';
import { AppError } from '../errors.js';
import { findGrant, findRefreshFamily, findRefreshToken, revokeGrantsOfUser } from '../storage/repos/grants.js';
import { findUserById } from '../storage/repos/users.js';
import { revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import {
  LoginBody,
  LogoutBody,
  MailSent,
  MagicLinkRequestBody,
  MagicLinkVerifyBody,
  PasswordForgotBody,
  PasswordResetBody,
  ProfileCompleteBody,
  RefreshBody,
  RegisterBody,
} from './schemas.js';
import { keepAtRestSignIn } from '../account-deletion/index.js';
import { mfaSignInRoutes } from '../mfa/index.js';
import { FIRST_FACTOR } from '../sign-in/service.js';
import { checkRedirectUri, namedClientId, resolveApp } from '../sign-in/requesting-app.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { passwordHashingStats } from './passwords.js';

/**
 * End-user REST sign-in, `/v1/auth/*` (docs/reference/rest-api.md#end-user-sign-in).
 * Every POST here counts against the per-IP limit (IP_AUTH_PER_MINUTE) before its body is parsed.
 * The routes authenticate the user and the app; what follows (policy, consent, tokens) is `app.signIn`'s.
 */

const mailLocale = (request: FastifyRequest): Locale => pickLocale(undefined, request.headers['accept-language']);

const noStore = (reply: FastifyReply) => reply.header('cache-control', 'no-store').header('pragma', 'no-cache');

export default async function authRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const issuing = { authenticate: true };
  const naming = { authenticate: false };
  app.addHook('onRequest', async (request) => {
    if (request.method === 'POST') await app.throttle.hitIp(request);
  });
  // CORS for single-page apps (docs/reference/rest-api.md#cors): the origins of the app named by client_id or X-Client-Id.
  app.addHook('onSend', corsOnSend({ appIdOf: (request) => bodyClientId(request) ?? headerClientId(request), unnamed: 'none' }));
  app.options('/*', answerPreflight);
  // Every route names its app (400 without one; 401 unknown or disabled; 403 without the Auth feature) and is throttled per IP.
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, { tags: ['auth'], errors: { 400: ['invalid_request'], 401: ['invalid_client'], 403: ['feature_disabled'], 429: ['rate_limited'] } }),
  );
  const signedIn = json('Signed in (`status: ok`), or a step is pending (`status: pending`).', SignInResult);

  app.post(
    '/register',
    {
      schema: {
        operationId: 'register',
        summary: 'Register an end user and sign in',
        description:
          'Creates the account, mails a verification code, and signs the user in to the app. A confidential app authenticates (Basic or `client_secret`).',
        security: OPTIONAL_CLIENT_AUTH,
        body: RegisterBody,
        response: { 201: signedIn },
        errors: { 400: ['weak_password'], 409: ['email_taken'] },
        examples: {
          register: {
            summary: 'A new account',
            body: { email: 'grace@example.com', password: 'tabby-violin-harbour-42', name: 'Grace Hopper', client_id: EXAMPLE.appId, accept_terms: true },
            status: 201,
            response: { status: 'ok', user: { ...EXAMPLE_USER, id: 'usr_01k2v6xc2e4g6j8l0n2q4s6u8w', email: 'grace@example.com', name: 'Grace Hopper', email_verified: false }, ...EXAMPLE_TOKENS },
          },
          emailTaken: {
            summary: 'The email already has an account',
            body: { email: EXAMPLE.email, password: 'tabby-violin-harbour-42', client_id: EXAMPLE.appId },
            status: 409,
            response: { code: 'email_taken', message: 'An account with this email already exists.' },
          },
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const client = await resolveApp(app, request, body, issuing);
      const dpopJkt = await app.tokens.dpop.issuingKey(request, reply, client, '/v1/auth/register');
      const ctx = { ...requestContext(request), appId: client.id, dpopJkt };
      const user = await app.accounts.register(
        { email: body.email, password: body.password, name: body.name, acceptLegal: body.accept_terms === true, locale: mailLocale(request) },
        ctx,
      );
      const result = await app.signIn.completeDirect(client, user, ctx, FIRST_FACTOR.register);
      return noStore(reply).code(201).send(result);
    },
  );

  app.post(
    '/login',
    {
      schema: {
        operationId: 'login',
        summary: 'Sign in with email and password',
        description:
          'After LOGIN_MAX_FAILURES failures for an address, sign-in is locked (429) for LOGIN_LOCK_SECONDS, even with the right password. ' +
          'An account whose deletion is scheduled answers the right password with 403 `account_deletion_scheduled` (with `deletion_scheduled_at`) and nothing else changes; ' +
          'the same request with `cancel_deletion: true` keeps the account (`user.deletion_cancelled`) and signs in as usual.',
        security: OPTIONAL_CLIENT_AUTH,
        body: LoginBody,
        response: { 200: signedIn },
        errors: { 400: ['weak_password'], 401: ['invalid_credentials'], 403: ['user_disabled', 'user_blocked', 'account_deletion_scheduled', 'forbidden', 'password_expired'] },
        examples: {
          login: {
            summary: 'The right password',
            body: { email: EXAMPLE.email, password: EXAMPLE.password, client_id: EXAMPLE.appId },
            status: 200,
            response: { status: 'ok', user: EXAMPLE_USER, ...EXAMPLE_TOKENS },
          },
          wrongPassword: {
            summary: 'A wrong password (the same answer as for an unknown email)',
            body: { email: EXAMPLE.email, password: 'not the password', client_id: EXAMPLE.appId },
            status: 401,
            response: { code: 'invalid_credentials', message: 'The email or password is incorrect.' },
          },
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const client = await resolveApp(app, request, body, issuing);
      const dpopJkt = await app.tokens.dpop.issuingKey(request, reply, client, '/v1/auth/login');
      const ctx = { ...requestContext(request), appId: client.id, dpopJkt };
      let user = await app.accounts.verifyLogin({ email: body.email, password: body.password, newPassword: body.new_password, locale: mailLocale(request), passwordPolicy: client.passwordPolicy }, ctx);
      if (user.deletion_scheduled_at !== null) {
        // docs/account/deletion.md: the right password may keep the account, only when asked to.
        if (body.cancel_deletion !== true) {
          throw new AppError('account_deletion_scheduled', { extra: { deletion_scheduled_at: isoTime(user.deletion_scheduled_at) }, detail: 'sign-in during the deletion grace' });
        }
        await keepAtRestSignIn(app, user, ctx);
        user = { ...user, deletion_scheduled_at: null };
      }
      const result = await app.signIn.completeDirect(client, user, ctx, FIRST_FACTOR.password);
      return noStore(reply).send(result);
    },
  );

  app.post(
    '/magic-link/request',
    {
      schema: {
        operationId: 'requestMagicLink',
        summary: 'Mail a sign-in link and code',
        description: 'Answers the same for any email (no enumeration). The link goes to `redirect_uri?magic_token=…` (whitelisted) or the hosted page; 15 min, single use.',
        body: MagicLinkRequestBody,
        response: { 202: json('Sent (or silently not, for an unknown email).', MailSent) },
        errors: { 400: ['invalid_redirect_uri'] },
        examples: {
          magicLink: { summary: 'A link to the hosted page', body: { email: EXAMPLE.email, client_id: EXAMPLE.appId }, status: 202, response: { status: 'sent' } },
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const client = await resolveApp(app, request, body, naming);
      const redirectUri = checkRedirectUri(client, body.redirect_uri);
      await app.accounts.requestMagicLink({ email: body.email, locale: mailLocale(request), redirectUri, app: client }, requestContext(request));
      return noStore(reply).code(202).send({ status: 'sent' });
    },
  );

  app.post(
    '/magic-link/verify',
    {
      schema: {
        operationId: 'verifyMagicLink',
        summary: 'Sign in with a magic-link token or code',
        security: OPTIONAL_CLIENT_AUTH,
        body: MagicLinkVerifyBody,
        response: { 200: signedIn },
        errors: { 400: ['invalid_token', 'invalid_code', 'code_expired'], 403: ['user_disabled', 'user_blocked'] },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const client = await resolveApp(app, request, body, issuing);
      const dpopJkt = await app.tokens.dpop.issuingKey(request, reply, client, '/v1/auth/magic-link/verify');
      const ctx = { ...requestContext(request), appId: client.id, dpopJkt };
      const user = body.token !== undefined ? await app.accounts.consumeMagicToken(body.token, ctx) : await app.accounts.consumeMagicCode({ email: body.email!, code: body.code! }, ctx);
      const result = await app.signIn.completeDirect(client, user, ctx, FIRST_FACTOR.magicLink);
      return noStore(reply).send(result);
    },
  );

  app.post(
    '/password/forgot',
    {
      schema: {
        operationId: 'forgotPassword',
        summary: 'Mail a password-reset link',
        description: 'Answers the same for any email. The link goes to `redirect_uri?reset_token=…` (whitelisted) or the hosted page; 30 min, single use.',
        body: PasswordForgotBody,
        response: { 202: json('Sent (or silently not, for an unknown email).', MailSent) },
        errors: { 400: ['invalid_redirect_uri'] },
        examples: {
          forgot: { summary: 'A link to the hosted page', body: { email: EXAMPLE.email, client_id: EXAMPLE.appId }, status: 202, response: { status: 'sent' } },
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const client = await resolveApp(app, request, body, naming);
      const redirectUri = checkRedirectUri(client, body.redirect_uri);
      await app.accounts.requestPasswordReset({ email: body.email, locale: mailLocale(request), redirectUri, app: client }, requestContext(request));
      return noStore(reply).code(202).send({ status: 'sent' });
    },
  );

  app.post(
    '/password/reset',
    {
      schema: {
        operationId: 'resetPassword',
        summary: 'Set a new password with a reset token',
        description: 'Revokes every refresh token and session of the user.',
        body: PasswordResetBody,
        response: { 204: noBody('The password is changed.') },
        errors: { 400: ['invalid_token', 'weak_password'] },
      },
    },
    async (request, reply) => {
      const body = request.body;
      // The app is optional here (a token mailed to {auth_url} is not bound to one); a token mailed to an
      // app's redirect URI works only with that app's client_id or X-Client-Id (docs/reference/rest-api.md#magic-links-and-reset-links).
      const client = namedClientId(request, body) !== undefined ? await resolveApp(app, request, body, naming) : undefined;
      await app.accounts.resetPassword({ token: body.reset_token, password: body.password, locale: mailLocale(request) }, { ...requestContext(request), appId: client?.id ?? null });
      return noStore(reply).code(204).send();
    },
  );

  app.post(
    '/refresh',
    {
      schema: {
        operationId: 'refreshTokens',
        summary: 'Rotate a refresh token',
        description:
          'The same token again within REFRESH_REUSE_GRACE gets the identical answer; later it revokes its whole family. Without a named app, the token\'s own app (which authenticates when confidential).',
        security: OPTIONAL_CLIENT_AUTH,
        body: RefreshBody,
        response: { 200: json('New tokens (`Cache-Control: no-store`).', TokenResponse) },
        errors: { 400: ['invalid_grant', 'invalid_scope'] },
        examples: {
          refresh: { summary: 'Rotate', body: { refresh_token: EXAMPLE.refreshToken, client_id: EXAMPLE.appId }, status: 200, response: EXAMPLE_TOKENS },
          unknown: {
            summary: 'An unknown token',
            body: { refresh_token: 'rt_unknown', client_id: EXAMPLE.appId },
            status: 400,
            response: { code: 'invalid_grant', message: 'The grant is invalid, expired or revoked.' },
          },
        },
      },
    },
    async (request, reply) => {
      const body = request.body;
      // No client named: the token's own app (a refresh token is bound to exactly one client), which
      // must still authenticate when it is confidential.
      const family = await findRefreshFamily(app.db, hashSecret(body.refresh_token));
      const tokenApp = family?.token.app_id;
      const namesClient = namedClientId(request, body) !== undefined || request.headers.authorization !== undefined;
      if (tokenApp === undefined && !namesClient) throw new AppError('invalid_grant', { reason: 'refresh_token_unknown' });
      const client = await resolveApp(app, request, body, { authenticate: true, fallbackClientId: tokenApp });
      const dpopJkt = await app.tokens.dpop.issuingKey(request, reply, client, '/v1/auth/refresh');
      const json = await app.tokens.refresh({ family, client, scope: body.scope, dpopJkt }, requestContext(request));
      return noStore(reply).type('application/json; charset=utf-8').send(json);
    },
  );

  app.post(
    '/logout',
    {
      schema: {
        operationId: 'logout',
        summary: 'Revoke a refresh token (and with `all`, every session of the user)',
        description: 'Always 204 for a well-formed request, also for an unknown or used token.',
        body: LogoutBody,
        response: { 204: noBody('Signed out.') },
        examples: { logout: { summary: 'Sign out of this app', body: { refresh_token: EXAMPLE.refreshToken }, status: 204 } },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const row = await findRefreshToken(app.db, hashSecret(body.refresh_token));
      if (row && (body.client_id === undefined || body.client_id === row.app_id)) {
        const revoked = await app.tokens.revokeRefreshToken(body.refresh_token, row.app_id);
        const grant = revoked ?? (await findGrant(app.db, row.grant_id));
        if (body.all && grant) {
          const userId = 'userId' in grant ? grant.userId : grant.user_id;
          const now = app.clock.now();
          await app.db.transaction().execute(async (trx) => {
            await revokeGrantsOfUser(trx, userId, now, 'logout_all');
            await revokeBrowserSessionsOfUser(trx, userId, now);
          });
        }
      }
      return noStore(reply).code(204).send();
    },
  );

  app.post(
    '/profile/complete',
    {
      schema: {
        operationId: 'completeProfile',
        summary: 'Finish a pending sign-in',
        description: 'With the session of a `pending` result and the missing profile data (may be empty once the step is done elsewhere).',
        security: OPTIONAL_CLIENT_AUTH,
        body: ProfileCompleteBody,
        response: { 200: signedIn },
        errors: { 400: ['invalid_token'], 403: ['user_disabled', 'user_blocked'] },
      },
    },
    async (request, reply) => {
      const body = request.body;
      const claims = await app.tokens.verifySession(body.session, namedClientId(request, body));
      const client = await resolveApp(app, request, { ...body, client_id: claims.appId }, issuing);
      const grant = await findGrant(app.db, claims.grantId);
      const user = await findUserById(app.db, claims.sub);
      if (!grant || !user) throw new AppError('invalid_token', { detail: 'grant or user gone' });
      const result = await app.signIn.completePending(client, grant, user, body.data, requestContext(request));
      return noStore(reply).send(result);
    },
  );

  await app.register(mfaSignInRoutes, { prefix: '/mfa' });
}
