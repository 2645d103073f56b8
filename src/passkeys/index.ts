import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { resolveApp } from '../sign-in/requesting-app.js';
import { AppError } from '../errors.js';
import { bodyClientId, corsOnSend, headerClientId } from '../plugins/cors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { VIEWS_DIR } from '../plugins/views.js';
import { originsOfApp } from '../shared/cors.js';
import { safeEqual } from '../shared/ids.js';
import { requestContext } from '../shared/request-context.js';
import { json, OPTIONAL_CLIENT_AUTH, shareRouteDocs, text } from '../shared/responses.js';
import { SignInResult } from '../shared/schemas.js';
import { sessionAuthentication } from '../plugins/browser-sessions.js';
import { parseAmr } from '../shared/acr.js';
import { type FlowState, livePendingMfa } from '../shared/pending-flow.js';
import { findGrant } from '../storage/repos/grants.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { relyingPartyOf } from './relying-party.js';
import {
  AuthenticationOptions,
  PageOptionsBody,
  Passkey,
  RegisterVerifyBody,
  RegistrationOptions,
  SignInOptionsBody,
  SignInVerifyBody,
} from './schemas.js';
import { Passkeys, type PasskeyView } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { AuthenticationOptions, AuthenticationResponse, RegistrationResponse } from './schemas.js';

declare module 'fastify' {
  interface FastifyInstance {
    passkeys: Passkeys;
  }
}

/** `app.passkeys`: the passkey service (service.ts). Logs once at start-up when passkeys are off, and why. */
export const passkeysPlugin = fp(
  async (app: FastifyInstance) => {
    const rp = relyingPartyOf(app.config.authUrl);
    if (!rp.enabled) app.log.warn({ auth_url: app.config.authUrl }, `passkeys are off: ${rp.reason}`);
    app.decorate('passkeys', new Passkeys({ db: app.db, clock: app.clock, rp, factors: app.mfa }));
  },
  { name: 'passkeys', dependencies: ['db', 'mfa'] },
);

/** The browser half of WebAuthn, served from the installed package (its version is in the page's URL). */
// The package's entry is `<dir>/script/index.js` (its exports do not include package.json).
const browserPackageDir = dirname(dirname(createRequire(import.meta.url).resolve('@simplewebauthn/browser')));
const browserBundle = readFileSync(join(browserPackageDir, 'dist', 'bundle', 'index.umd.min.js'), 'utf8');
export const BROWSER_BUNDLE_VERSION = (JSON.parse(readFileSync(join(browserPackageDir, 'package.json'), 'utf8')) as { version: string }).version;
const pageScript = readFileSync(join(VIEWS_DIR, 'assets', 'passkeys.js'), 'utf8');

const noStore = (reply: FastifyReply) => reply.header('cache-control', 'no-store').header('pragma', 'no-cache');

export const toPasskeyJson = (p: PasskeyView) => ({
  id: p.id,
  name: p.name,
  device_type: p.deviceType,
  backed_up: p.backedUp,
  app_id: p.appId,
  created_at: p.createdAt,
  last_used_at: p.lastUsedAt,
});

/**
 * The passkey routes outside the hosted form pages (those are in pages/passkeys.ts):
 * - the scripts of the pages (the `@simplewebauthn/browser` bundle, long-cached; the page script);
 * - the options the page script asks for (`/account/passkeys/options`, `/login/passkey/options`):
 *   JSON, bound to the browser session and carrying its CSRF token;
 * - `/v1/auth/passkey/*` for apps that render their own UI.
 */
export default async function passkeyRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();

  app.get(
    '/assets/simplewebauthn.js',
    { schema: { operationId: 'getWebAuthnScript', summary: 'The WebAuthn browser library of the hosted pages', tags: ['pages'], response: { 200: text('`@simplewebauthn/browser` (UMD bundle).', 'text/javascript') } } },
    async (_request, reply) => reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=31536000, immutable').send(browserBundle),
  );
  app.get(
    '/assets/passkeys.js',
    { schema: { operationId: 'getPasskeysScript', summary: 'The passkey script of the hosted pages', tags: ['pages'], response: { 200: text('The script.', 'text/javascript') } } },
    async (_request, reply) => reply.type('text/javascript; charset=utf-8').header('cache-control', 'public, max-age=3600').send(pageScript),
  );

  await app.register(pageOptionsRoutes);
  await app.register(restRoutes, { prefix: '/v1/auth/passkey' });
}

/** The browser session of a page-script request, which must carry the session's CSRF token. */
async function pageSession(app: FastifyInstance, request: FastifyRequest, csrf: string) {
  const session = await app.browserSessions.load(request);
  if (!session || !safeEqual(csrf, session.csrf_token)) {
    throw new AppError('forbidden', { message: 'This page has expired. Reload it and try again.', detail: 'passkey options: no session or CSRF mismatch' });
  }
  return session;
}

/** Options for the page script of `/account` (add a passkey) and `/login` (sign in with one). */
async function pageOptionsRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['pages'], errors: { 400: ['invalid_request'], 403: ['forbidden', 'feature_disabled'], 429: ['rate_limited'] } }));
  app.addHook('onRequest', async (request) => {
    app.passkeys.assertEnabled();
    await app.throttle.hitIp(request);
  });

  app.post(
    '/account/passkeys/options',
    {
      schema: {
        operationId: 'accountPasskeyOptions',
        summary: 'Options to add a passkey on the account page',
        description: 'For the page script: the signed-in browser session (cookie) and its CSRF token. The answer goes to `POST /account/passkeys` (`action=add_passkey`).',
        body: PageOptionsBody,
        response: { 200: json('Options for `navigator.credentials.create()`.', RegistrationOptions) },
        errors: { 401: ['unauthorized'] },
      },
    },
    async (request, reply) => {
      const session = await pageSession(app, request, request.body.csrf);
      const user = session.user_id ? await findUserById(app.db, session.user_id) : undefined;
      if (!user || user.status !== 'active') throw new AppError('unauthorized', { message: 'Sign in on the account page first.' });
      // Refused before the ceremony, so the authenticator does not make a credential the server then refuses.
      const refusal = await app.mfa.changeRefusal(user, 'add', sessionAuthentication(session));
      if (refusal === 'email_unverified') {
        throw new AppError('forbidden', { message: 'Verify your email address first, then add a passkey.', detail: 'factor change refused: email_unverified' });
      }
      if (refusal) {
        throw new AppError('forbidden', { message: 'Confirm your second factor first (“Verify with my second factor” above).', detail: `factor change refused: ${refusal}` });
      }
      const options = await app.passkeys.registrationOptions({ user, binding: `session:${session.id_hash}`, appId: null });
      return noStore(reply).send(options);
    },
  );

  app.post(
    '/login/passkey/options',
    {
      schema: {
        operationId: 'loginPasskeyOptions',
        summary: 'Options to sign in with a passkey on the sign-in page',
        description: 'For the page script: the browser session (cookie) and its CSRF token. Discoverable credentials; the answer goes to `POST /login/passkey` (`action=passkey`).',
        body: PageOptionsBody,
        response: { 200: json('Options for `navigator.credentials.get()`.', AuthenticationOptions) },
      },
    },
    async (request, reply) => {
      const session = await pageSession(app, request, request.body.csrf);
      const options = await app.passkeys.authenticationOptions({ binding: `session:${session.id_hash}` });
      return noStore(reply).send(options);
    },
  );

  app.post(
    '/mfa/passkey/options',
    {
      schema: {
        operationId: 'mfaPasskeyOptions',
        summary: 'Options to confirm a sign-in with a passkey as its second factor',
        description:
          'For the page script of `/mfa`: the browser session (cookie) with a pending second step, and its CSRF token. Only the passkeys of the user who gave the first factor; the answer goes to `POST /mfa` (`action=passkey`).',
        body: PageOptionsBody,
        response: { 200: json('Options for `navigator.credentials.get()`.', AuthenticationOptions) },
      },
    },
    async (request, reply) => {
      const session = await pageSession(app, request, request.body.csrf);
      const pending = livePendingMfa(app.browserSessions.dataOf<FlowState>(session), app.clock.now());
      if (!pending) throw new AppError('invalid_request', { message: 'This sign-in has expired. Sign in again.', detail: 'no pending second factor' });
      const options = await app.passkeys.authenticationOptions({ userId: pending.userId, binding: `session:${session.id_hash}` });
      return noStore(reply).send(options);
    },
  );
}

/**
 * `/v1/auth/passkey/*`: passkeys for apps that render their own UI. The ceremony runs on the app's
 * page, so its origins (those of its redirect URIs and `allowed_origins`) are accepted beside
 * AUTH_URL's; the RP ID stays AUTH_URL's host, so the app must be on it or below it. A passkey an app
 * registers with its access token belongs to that app: it signs in only there and is no second factor
 * (an app's token must never add a credential that opens the account at every app — service.ts).
 * Every POST counts against the per-IP limit of `/v1/auth`.
 */
async function restRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.addHook('onRequest', async (request) => {
    if (request.method !== 'POST') return;
    app.passkeys.assertEnabled();
    await app.throttle.hitIp(request);
  });
  app.addHook('onSend', corsOnSend({ appIdOf: (request) => bodyClientId(request) ?? headerClientId(request), unnamed: 'none' }));
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, { tags: ['auth'], errors: { 400: ['invalid_request'], 403: ['feature_disabled'], 429: ['rate_limited'] } }),
  );

  /**
   * The signed-in user of an app's access token (registration), when its sign-in may add a passkey
   * for this app (Mfa.changeRefusal): only on a proven address, and once the user has a second factor,
   * from a sign-in that proved one within the last 15 minutes — or a stolen password would be enough.
   */
  async function bearerUser(request: FastifyRequest): Promise<{ user: UserRow; appId: string }> {
    const identity = await app.tokens.authenticate(request);
    request.corsAppId = identity.appId;
    const [user, grant] = await Promise.all([findUserById(app.db, identity.userId), findGrant(app.db, identity.grantId)]);
    if (!user || user.status !== 'active' || !grant) throw new AppError('unauthorized', { detail: 'user or grant gone, or user disabled' });
    const refusal = await app.mfa.changeRefusal(user, 'add', { amr: parseAmr(grant.amr), authTime: grant.auth_time });
    if (refusal) {
      const message =
        refusal === 'email_unverified'
          ? 'The user must verify their email address before a passkey can be added.'
          : 'Adding a passkey to an account with a second factor needs a sign-in with that factor in the last 15 minutes.';
      throw new AppError('forbidden', { message, detail: `factor change refused: ${refusal}` });
    }
    return { user, appId: identity.appId };
  }

  app.post(
    '/options',
    {
      schema: {
        operationId: 'passkeySignInOptions',
        summary: 'Options to sign in with a passkey',
        description: 'Discoverable credentials (`allowCredentials` empty), user verification required. The challenge is bound to the app and answers once within 5 minutes.',
        body: SignInOptionsBody,
        response: { 200: json('Options for `navigator.credentials.get()`.', AuthenticationOptions) },
        errors: { 401: ['invalid_client'] },
      },
    },
    async (request, reply) => {
      const client = await resolveApp(app, request, request.body, { authenticate: false });
      request.corsAppId = client.id;
      const options = await app.passkeys.authenticationOptions({ binding: `app:${client.id}` });
      return noStore(reply).send(options);
    },
  );

  app.post(
    '/verify',
    {
      schema: {
        operationId: 'passkeySignIn',
        summary: 'Sign in with a passkey',
        description:
          'The answer of `navigator.credentials.get()` to options from `POST /v1/auth/passkey/options` of the same app. A confidential app authenticates (Basic or `client_secret`). ' +
          'An account-wide passkey (added on the hosted account page) or one this app registered; a passkey another app registered → 401 `invalid_credentials`. ' +
          'The sign-in is strong: `amr` `swk` (no attestation is asked for, so nothing claims the key is hardware).',
        security: OPTIONAL_CLIENT_AUTH,
        body: SignInVerifyBody,
        response: { 200: json('Signed in (`status: ok`), or a step is pending (`status: pending`).', SignInResult) },
        errors: { 400: ['invalid_token'], 401: ['invalid_client', 'invalid_credentials'], 403: ['user_disabled', 'user_blocked'] },
      },
    },
    async (request, reply) => {
      const client = await resolveApp(app, request, request.body, { authenticate: true });
      request.corsAppId = client.id;
      const ctx = { ...requestContext(request), appId: client.id };
      const verified = await app.passkeys.verifyAuthentication({ response: request.body.response, binding: `app:${client.id}`, appId: client.id, appOrigins: originsOfApp(client) });
      const user = await findUserById(app.db, verified.userId);
      if (!user) throw new AppError('invalid_credentials', { message: 'The passkey could not be verified.', detail: 'user of the passkey gone' });
      const result = await app.signIn.completeDirect(client, user, ctx, { method: 'passkey', amr: verified.amr });
      return noStore(reply).send(result);
    },
  );

  app.post(
    '/register/options',
    {
      schema: {
        operationId: 'passkeyRegistrationOptions',
        summary: 'Options to add a passkey for this app to the signed-in user',
        description:
          "With the user's access token from this app. A discoverable credential with user verification; the user's passkeys are excluded. " +
          'The passkey will sign in only at this app, and is no second factor of the account (account-wide passkeys are added on the hosted account page). ' +
          'Refused (403 `forbidden`) while the user has not verified their email address, and, once the user has a second factor, unless the token comes from a sign-in that proved one (`amr` has `mfa` or `swk`) in the last 15 minutes.',
        security: [{ accessToken: [] }],
        response: { 200: json('Options for `navigator.credentials.create()`.', RegistrationOptions) },
        errors: { 401: ['unauthorized'], 403: ['forbidden'] },
      },
    },
    async (request, reply) => {
      const { user, appId } = await bearerUser(request);
      const options = await app.passkeys.registrationOptions({ user, binding: `app:${appId}`, appId });
      return noStore(reply).send(options);
    },
  );

  app.post(
    '/register/verify',
    {
      schema: {
        operationId: 'passkeyRegister',
        summary: 'Add a passkey for this app to the signed-in user',
        description:
          'The answer of `navigator.credentials.create()` to options from `POST /v1/auth/passkey/register/options` with the same token\'s app. Records `passkey.registered` (`scope: app`). ' +
          'The passkey signs in only at this app (`POST /v1/auth/passkey/verify`); it is no second factor, so no recovery codes come with it.',
        security: [{ accessToken: [] }],
        body: RegisterVerifyBody,
        response: { 201: json('The passkey, scoped to this app.', Passkey) },
        errors: { 400: ['invalid_token'], 401: ['unauthorized'], 403: ['forbidden'], 409: ['conflict'] },
      },
    },
    async (request, reply) => {
      const { user, appId } = await bearerUser(request);
      const client = await resolveApp(app, request, { client_id: appId }, { authenticate: false });
      const { passkey } = await app.passkeys.verifyRegistration(
        { userId: user.id, binding: `app:${appId}`, response: request.body.response, name: request.body.name, appOrigins: originsOfApp(client), appId, via: 'api' },
        requestContext(request),
      );
      return noStore(reply).code(201).send(toPasskeyJson(passkey));
    },
  );
}
