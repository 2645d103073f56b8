import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { pickLocale, type Locale } from '../plugins/i18n.js';
import { answerPreflight, bodyClientId, corsOnSend, headerClientId } from '../plugins/cors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { requestContext } from '../shared/request-context.js';
import { hashSecret } from '../shared/ids.js';
import { AppError } from '../errors.js';
import { findGrant, findRefreshToken, revokeGrantsOfUser } from '../storage/repos/grants.js';
import { findUserById } from '../storage/repos/users.js';
import { revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import {
  LoginBody,
  LogoutBody,
  MagicLinkRequestBody,
  MagicLinkVerifyBody,
  PasswordForgotBody,
  PasswordResetBody,
  ProfileCompleteBody,
  RefreshBody,
  RegisterBody,
} from './schemas.js';
import { checkRedirectUri, namedClientId, resolveApp } from './service.js';

/**
 * End-user REST sign-in, `/v1/auth/*` (SPEC 4.7; CONTRACT §5, §14.3–8, §14.11, §14.18–20).
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
  // CORS for single-page apps (CONTRACT §14.17): the origins of the app named by client_id or X-Client-Id.
  app.addHook('onSend', corsOnSend({ appIdOf: (request) => bodyClientId(request) ?? headerClientId(request), unnamed: 'none' }));
  app.options('/*', answerPreflight);

  app.post('/register', { schema: { body: RegisterBody } }, async (request, reply) => {
    const body = request.body;
    const client = await resolveApp(app, request, body, issuing);
    const ctx = { ...requestContext(request), appId: client.id };
    const user = await app.accounts.register(
      { email: body.email, password: body.password, name: body.name, acceptLegal: body.accept_terms === true, locale: mailLocale(request) },
      ctx,
    );
    const result = await app.signIn.completeDirect(client, user, ctx, 'register');
    return noStore(reply).code(201).send(result);
  });

  app.post('/login', { schema: { body: LoginBody } }, async (request, reply) => {
    const body = request.body;
    const client = await resolveApp(app, request, body, issuing);
    const ctx = { ...requestContext(request), appId: client.id };
    const user = await app.accounts.verifyLogin({ email: body.email, password: body.password }, ctx);
    const result = await app.signIn.completeDirect(client, user, ctx, 'password');
    return noStore(reply).send(result);
  });

  app.post('/magic-link/request', { schema: { body: MagicLinkRequestBody } }, async (request, reply) => {
    const body = request.body;
    const client = await resolveApp(app, request, body, naming);
    const redirectUri = checkRedirectUri(client, body.redirect_uri);
    await app.accounts.requestMagicLink({ email: body.email, locale: mailLocale(request), redirectUri, app: client }, requestContext(request));
    return noStore(reply).code(202).send({ status: 'sent' });
  });

  app.post('/magic-link/verify', { schema: { body: MagicLinkVerifyBody } }, async (request, reply) => {
    const body = request.body;
    const client = await resolveApp(app, request, body, issuing);
    const ctx = { ...requestContext(request), appId: client.id };
    const user = body.token !== undefined ? await app.accounts.consumeMagicToken(body.token, ctx) : await app.accounts.consumeMagicCode({ email: body.email!, code: body.code! }, ctx);
    const result = await app.signIn.completeDirect(client, user, ctx, 'magic_link');
    return noStore(reply).send(result);
  });

  app.post('/password/forgot', { schema: { body: PasswordForgotBody } }, async (request, reply) => {
    const body = request.body;
    const client = await resolveApp(app, request, body, naming);
    const redirectUri = checkRedirectUri(client, body.redirect_uri);
    await app.accounts.requestPasswordReset({ email: body.email, locale: mailLocale(request), redirectUri, app: client }, requestContext(request));
    return noStore(reply).code(202).send({ status: 'sent' });
  });

  app.post('/password/reset', { schema: { body: PasswordResetBody } }, async (request, reply) => {
    const body = request.body;
    // The app is optional here (a token mailed to {auth_url} is not bound to one); a token mailed to an
    // app's redirect URI works only with that app's client_id or X-Client-Id (CONTRACT §15.2).
    const client = namedClientId(request, body) !== undefined ? await resolveApp(app, request, body, naming) : undefined;
    await app.accounts.resetPassword({ token: body.reset_token, password: body.password, locale: mailLocale(request) }, { ...requestContext(request), appId: client?.id ?? null });
    return noStore(reply).code(204).send();
  });

  app.post('/refresh', { schema: { body: RefreshBody } }, async (request, reply) => {
    const body = request.body;
    // No client named: the token's own app (a refresh token is bound to exactly one client), which
    // must still authenticate when it is confidential.
    const tokenApp = (await findRefreshToken(app.db, hashSecret(body.refresh_token)))?.app_id;
    const namesClient = namedClientId(request, body) !== undefined || request.headers.authorization !== undefined;
    if (tokenApp === undefined && !namesClient) throw new AppError('invalid_grant', { detail: 'unknown refresh token' });
    const client = await resolveApp(app, request, body, { authenticate: true, fallbackClientId: tokenApp });
    const json = await app.tokens.refresh({ refreshToken: body.refresh_token, clientId: client.id, scope: body.scope }, requestContext(request));
    return noStore(reply).type('application/json; charset=utf-8').send(json);
  });

  app.post('/logout', { schema: { body: LogoutBody } }, async (request, reply) => {
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
  });

  app.post('/profile/complete', { schema: { body: ProfileCompleteBody } }, async (request, reply) => {
    const body = request.body;
    const claims = await app.tokens.verifySession(body.session, namedClientId(request, body));
    const client = await resolveApp(app, request, { ...body, client_id: claims.appId }, issuing);
    const grant = await findGrant(app.db, claims.grantId);
    const user = await findUserById(app.db, claims.sub);
    if (!grant || !user) throw new AppError('invalid_token', { detail: 'grant or user gone' });
    const result = await app.signIn.completePending(client, grant, user, body.data, requestContext(request));
    return noStore(reply).send(result);
  });
}
