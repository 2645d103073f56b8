import type { FastifyInstance, FastifyReply } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, isAppError } from '../errors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { checkChallenge } from '../sign-in/pkce.js';
import { resolveApp } from '../sign-in/requesting-app.js';
import { requestContext } from '../shared/request-context.js';
import { scopeList, unknownScopes } from '../shared/scopes.js';
import { appendQuery } from '../shared/url.js';
import { findIdentity } from '../storage/repos/idp.js';
import { findUserById } from '../storage/repos/users.js';
import { deleteProviderSetting, isValidIssuer, loadProviderConfig, providerFromEnv, saveProviderSetting } from './provider.js';
import { json, noBody, OPTIONAL_CLIENT_AUTH, redirect, shareRouteDocs } from '../shared/responses.js';
import {
  CallbackQuery,
  ExchangeBody,
  IdpSetting,
  IdpSettingBody,
  NativeResult,
  ResumeBody,
  StartQuery,
} from './schemas.js';
import { type AppRequest, IdpService } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export type { BindTicketData, ContinueTicketData } from './service.js';

/**
 * Provider sign-in routes: `GET /oauth/idp/start`, `GET /oauth/idp/callback` (HTML errors until the
 * app and redirect_uri are known, then error redirects), `POST /oauth/idp/exchange` and
 * `POST /oauth/idp/resume` (JSON). The `app.idp` service is shared with the `/continue` and
 * `/account` pages.
 */

/** A redirect with an error for codes the error handler would not redirect (5xx). */
function errorRedirect(app: FastifyInstance, reply: FastifyReply, target: { redirectUri: string; state?: string }, error: string, description: string) {
  reply.header('cache-control', 'no-store');
  return reply.redirect(appendQuery(target.redirectUri, { error, error_description: description, state: target.state, iss: app.config.baseUrl }), 302);
}

/**
 * The app of a browser request, answered as `/oauth/authorize` does (docs/reference/errors.md): an unknown or
 * disabled client_id is a 400 HTML error page, like an unregistered redirect_uri.
 */
async function browserApp(app: FastifyInstance, clientId: string, redirectUri: string) {
  try {
    return await app.idp.checkApp(clientId, redirectUri);
  } catch (error) {
    if (isAppError(error) && error.code === 'invalid_client') {
      throw new AppError('invalid_client', { status: 400, message: 'This application is unknown or disabled.', reason: error.reason });
    }
    throw error;
  }
}

async function idpRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['provider'] }));
  const backToApp = 'the app (`redirect_uri` with `session` or `code`, `state` and `iss`, or with `error`), or the hosted consent, profile or bind page';
  app.get(
    '/oauth/idp/start',
    {
      schema: {
        operationId: 'startProviderSignIn',
        summary: 'Start a browser sign-in with the provider (docs/guides/identity-provider.md#start-and-callback)',
        description:
          'Checks client_id and the exact redirect_uri first (an HTML error page, never a redirect, if either is wrong). Then errors redirect back with `error`, `state` and `iss` (not configured: `idp_oauth_not_configured`); otherwise 302 to the provider. PKCE (S256) is required for `response_mode=code`.',
        querystring: StartQuery,
        response: { 302: redirect("the provider's authorization endpoint, or back to the app with an error") },
        errors: { 400: ['invalid_client', 'invalid_redirect_uri'] },
      },
      config: { errorStyle: 'html' },
    },
    async (request, reply) => {
      const q = request.query;
      if (!q.client_id || !q.redirect_uri) throw new AppError('invalid_request', { message: 'client_id and redirect_uri are required.' });
      const client = await browserApp(app, q.client_id, q.redirect_uri);
      const target = { redirectUri: q.redirect_uri, state: q.state };
      request.errorRedirect = target;
      reply.header('cache-control', 'no-store');

      const mode = q.response_mode ?? 'session';
      if (mode !== 'session' && mode !== 'code') throw new AppError('invalid_request', { message: 'response_mode must be session or code.' });
      const pkce = checkChallenge(q.code_challenge, q.code_challenge_method, mode === 'code');
      if (!pkce.ok) throw new AppError('invalid_request', { message: `PKCE: ${pkce.reason}.` });
      const scope = q.scope === undefined ? undefined : scopeList(q.scope).join(' ');
      if (scope !== undefined && (scope === '' || unknownScopes(scope).length)) throw new AppError('invalid_scope');
      if (!client.features.auth) throw new AppError('access_denied', { message: 'This app does not have sign-in enabled.' });

      const provider = await app.idp.provider();
      if (!provider) return errorRedirect(app, reply, target, 'idp_oauth_not_configured', 'Sign-in with the identity provider is not configured.');
      const appRequest: AppRequest = {
        appId: client.id,
        redirectUri: q.redirect_uri,
        state: q.state,
        codeChallenge: q.code_challenge,
        codeChallengeMethod: q.code_challenge ? 'S256' : undefined,
        responseMode: mode,
        ...(scope !== undefined ? { scope } : {}),
        ...(q.nonce !== undefined ? { nonce: q.nonce } : {}),
      };
      let location: string;
      try {
        // Each start stores a provider transaction for anyone who asks: bounded per IP like the sign-in doors.
        await app.throttle.hitIp(request);
        location = await app.idp.begin(request, reply, { intent: 'signin', app: appRequest });
      } catch (error) {
        if (isAppError(error) && error.code === 'idp_unavailable') {
          request.log.warn({ detail: error.detail }, 'provider unavailable at start');
          return errorRedirect(app, reply, target, 'temporarily_unavailable', 'The identity provider could not be reached.');
        }
        if (isAppError(error) && error.code === 'rate_limited') {
          return errorRedirect(app, reply, target, 'temporarily_unavailable', 'Too many sign-ins from this address. Try again in a minute.');
        }
        throw error;
      }
      return reply.redirect(location, 302);
    },
  );

  app.get(
    '/oauth/idp/callback',
    {
      schema: {
        operationId: 'providerCallback',
        summary: 'Return from the provider (docs/guides/identity-provider.md#start-and-callback)',
        description: 'The redirect URI registered at the provider. An unknown, used or expired `state` is an HTML error page.',
        querystring: CallbackQuery,
        response: { 302: redirect('the app with an error'), 303: redirect(backToApp) },
      },
      config: { errorStyle: 'html' },
    },
    async (request, reply) => {
      const q = request.query;
      reply.header('cache-control', 'no-store');
      const expired = () => new AppError('invalid_request', { message: 'This sign-in has expired or was already used. Please start again.', detail: 'unknown, used or foreign state' });
      if (!q.state) throw expired();
      const tx = await app.idp.takeTransaction(request, q.state);
      if (!tx) throw expired();
      const ctx = requestContext(request);

      if (tx.intent === 'bind') {
        const account = `${app.config.authUrl}/account`;
        try {
          if (q.error) throw new AppError('access_denied', { detail: `provider error ${q.error.slice(0, 40)}` });
          const { token } = await app.idp.redeemCallback(tx, q);
          request.browserSession = await app.browserSessions.load(request);
          if (!tx.user_id || request.browserSession?.user_id !== tx.user_id) throw new AppError('forbidden', { detail: 'bind callback in a browser not signed in as the binding user' });
          await app.db.transaction().execute((trx) => app.idp.bind(trx, tx.user_id!, token.claims, ctx));
          return reply.redirect(`${account}?bound=1`, 303);
        } catch (error) {
          // An expected refusal is explained on the account page; anything else (a database outage) is
          // the error handler's to answer.
          if (!isAppError(error)) throw error;
          request.log.info({ code: error.code, detail: error.detail }, 'provider bind failed');
          return reply.redirect(`${account}?idp_error=${encodeURIComponent(error.code)}`, 303);
        }
      }

      const appRequest = tx.app!;
      request.errorRedirect = { redirectUri: appRequest.redirectUri, state: appRequest.state };
      await app.idp.checkApp(appRequest.appId, appRequest.redirectUri);
      if (q.error) {
        request.log.info({ providerError: q.error.slice(0, 40) }, 'provider returned an error');
        throw new AppError('access_denied', { message: 'Sign-in with the identity provider was cancelled or refused.' });
      }
      let verified;
      try {
        verified = await app.idp.redeemCallback(tx, q);
      } catch (error) {
        if (isAppError(error) && error.code === 'idp_unavailable') {
          request.log.warn({ detail: error.detail }, 'provider unavailable at callback');
          return errorRedirect(app, reply, request.errorRedirect, 'temporarily_unavailable', 'The identity provider could not be reached.');
        }
        throw error;
      }
      const { token } = verified;
      const identity = await findIdentity(app.db, token.claims.iss, token.claims.sub);
      const user = identity && (await findUserById(app.db, identity.userId));
      if (!user) {
        const url = await app.idp.createBindTicket(request, reply, { issuer: token.claims.iss, subject: token.claims.sub, email: typeof token.claims.email === 'string' ? token.claims.email : null, app: appRequest });
        return reply.redirect(url, 303);
      }
      return reply.redirect(await app.idp.finishBrowserSignIn(request, reply, appRequest, user), 303);
    },
  );

  const typed = app.withTypeProvider<ZodTypeProvider>();
  const nativeErrors = {
    400: ['invalid_redirect_uri', 'invalid_token', 'invalid_dpop_proof', 'use_dpop_nonce'],
    401: ['invalid_client', 'invalid_id_token', 'invalid_idp_code'],
    403: ['feature_disabled', 'user_disabled', 'user_blocked', 'idp_oauth_not_bound'],
    429: ['rate_limited'],
    502: ['idp_unavailable'],
    503: ['idp_oauth_not_configured'],
  };
  const nativeResult = json('`ok` with a session or a code, or `pending` with the hosted step to finish.', NativeResult);
  typed.post(
    '/oauth/idp/exchange',
    {
      schema: {
        operationId: 'exchangeProviderToken',
        summary: 'Sign in with a provider id_token or code (docs/guides/identity-provider.md#native-exchange-and-resume)',
        description:
          'Exactly one of `id_token` and `idp_code`. An id_token is accepted once. A confidential app authenticates (Basic or `client_secret`), as at every door that issues its tokens. Throttled per IP. With `response_mode=code`, a `DPoP` proof (or `dpop_jkt`) binds the code to its key (RFC 9449 §10).',
        security: OPTIONAL_CLIENT_AUTH,
        body: ExchangeBody,
        response: { 200: nativeResult },
        errors: nativeErrors,
      },
    },
    async (request, reply) => {
      await app.throttle.hitIp(request);
      reply.header('cache-control', 'no-store');
      // Before anything is used up: a refused proof leaves the id_token or code presentable again.
      const dpopJkt = await app.tokens.dpop.codeKey(request, reply, '/oauth/idp/exchange', request.body.dpop_jkt);
      const client = await resolveApp(app, request, request.body, { authenticate: true });
      return app.idp.exchange(client, { ...request.body, dpop_jkt: dpopJkt }, requestContext(request));
    },
  );

  typed.post(
    '/oauth/idp/resume',
    {
      schema: {
        operationId: 'resumeProviderSignIn',
        summary: 'Resume a pending native sign-in (docs/guides/identity-provider.md#native-exchange-and-resume)',
        description:
          '`consent=1` is only a signal: the server checks that consent and profile data are recorded. A still-pending answer issues a fresh ticket. A confidential app authenticates (Basic or `client_secret`). With `response_mode=code`, a `DPoP` proof (or `dpop_jkt`) binds the code to its key (RFC 9449 §10).',
        security: OPTIONAL_CLIENT_AUTH,
        body: ResumeBody,
        response: { 200: nativeResult },
        errors: nativeErrors,
      },
    },
    async (request, reply) => {
      await app.throttle.hitIp(request);
      reply.header('cache-control', 'no-store');
      const dpopJkt = await app.tokens.dpop.codeKey(request, reply, '/oauth/idp/resume', request.body.dpop_jkt);
      const client = await resolveApp(app, request, request.body, { authenticate: true });
      return app.idp.resume(client, { ...request.body, dpop_jkt: dpopJkt }, requestContext(request));
    },
  );
}

/** `PUT|GET|DELETE /v1/admin/idp` (docs/reference/rest-api.md#admin, docs/guides/identity-provider.md#configuration): registered inside the admin scope. */
export async function idpAdminRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const view = async () => {
    const provider = await loadProviderConfig(app.db, app.config);
    if (!provider) throw new AppError('not_found', { detail: 'no provider configured' });
    return {
      issuer: provider.issuer,
      client_id: provider.clientId,
      audiences: provider.audiences,
      name: provider.name,
      has_client_secret: Boolean(provider.clientSecret),
      source: provider.source,
    };
  };
  const refuseWhenEnv = () => {
    if (providerFromEnv(app.config)) throw new AppError('config_from_env');
  };

  const setting = { issuer: 'https://accounts.example', client_id: 'gatehouse', audiences: ['gatehouse'], name: 'Example ID', has_client_secret: true, source: 'settings' };
  app.get(
    '/idp',
    {
      schema: {
        operationId: 'getProviderSetting',
        summary: 'Read the provider configuration',
        response: { 200: json('The configuration (never the secret).', IdpSetting) },
        errors: { 404: ['not_found'] },
      },
    },
    async (_request, reply) => {
      reply.header('cache-control', 'no-store');
      return view();
    },
  );

  app.put(
    '/idp',
    {
      schema: {
        operationId: 'putProviderSetting',
        summary: 'Configure the provider',
        description: 'The issuer must be https (http only for loopback hosts). 409 when IDP_* come from the environment.',
        body: IdpSettingBody,
        response: { 200: json('The configuration.', IdpSetting) },
        errors: { 409: ['config_from_env'] },
        examples: {
          configure: {
            summary: 'An OpenID Connect provider',
            body: { issuer: 'https://accounts.example', client_id: 'gatehouse', client_secret: 'provider-secret', audiences: ['gatehouse'], name: 'Example ID' },
            status: 200,
            response: setting,
          },
        },
      },
    },
    async (request, reply) => {
      refuseWhenEnv();
      const body = request.body;
      if (!isValidIssuer(body.issuer)) {
        throw new AppError('invalid_request', { details: [{ path: 'body.issuer', message: 'must be https (http only for loopback hosts), without query or fragment' }] });
      }
      await saveProviderSetting(app.db, app.config, body, app.clock.now());
      app.idp.cache.clear();
      reply.header('cache-control', 'no-store');
      return view();
    },
  );

  app.delete(
    '/idp',
    {
      schema: {
        operationId: 'deleteProviderSetting',
        summary: 'Remove the provider configuration',
        response: { 204: noBody('Removed.') },
        errors: { 409: ['config_from_env'] },
        examples: { remove: { summary: 'Remove', status: 204 } },
      },
    },
    async (_request, reply) => {
      refuseWhenEnv();
      await deleteProviderSetting(app.db);
      app.idp.cache.clear();
      return reply.code(204).send();
    },
  );
}

async function idpPlugin(app: FastifyInstance) {
  app.decorate(
    'idp',
    new IdpService({ db: app.db, config: app.config, clock: app.clock, tokens: app.tokens, browserSessions: app.browserSessions, signIn: app.signIn }),
  );
  await app.register(idpRoutes);
}

export default fp(idpPlugin, { name: 'idp', dependencies: ['db', 'tokens', 'sign-in', 'browser-sessions', 'throttle'] });
