import type { FastifyInstance, FastifyRequest } from 'fastify';
import { answerPreflight, corsOnSend } from '../plugins/cors.js';
import { authorize, authorizeByPost } from './authorize.js';
import { parseBasic } from '../sign-in/client-auth.js';
import { firstValue } from './params.js';
import { introspect, revoke } from './revoke.js';
import { json, noBody, OPTIONAL_CLIENT_AUTH, redirect, shareRouteDocs } from '../shared/responses.js';
import { TokenResponse } from '../shared/schemas.js';
import { EXAMPLE, EXAMPLE_TOKENS } from '../shared/examples.js';
import { AuthorizeForm, DeviceAuthorizationParams, DeviceAuthorizationResponse, Introspection, ParParams, PushedRequest, IntrospectParams, RevokeParams, TokenParams, UserinfoClaims, UserinfoForm } from './schemas.js';
import { token } from './token.js';
import { pushAuthorizationRequest } from './par.js';
import { deviceAuthorization } from './device.js';
import { userinfo } from './userinfo.js';

/**
 * The OAuth 2.0 / OpenID Connect core (docs/reference/oauth.md#endpoints): /oauth/authorize, /oauth/par, /oauth/device_authorization, /oauth/token, /oauth/revoke,
 * /oauth/introspect, /oauth/userinfo. Token-style endpoints answer RFC 6749 §5.2 errors with
 * no-store; authorize renders HTML errors until client and redirect_uri are verified, then redirects.
 * CORS (docs/reference/rest-api.md#cors) on token, par, device_authorization, revoke and userinfo only; never on authorize.
 */
export default async function oauth(app: FastifyInstance) {
  const tokenClientId = (request: FastifyRequest) => parseBasic(request.headers.authorization)?.clientId ?? firstValue(request.body, 'client_id');
  const namedClientCors = corsOnSend({ appIdOf: tokenClientId, unnamed: 'none' });

  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['oauth'] }));
  const authorizeDocs = {
    summary: 'Authorization endpoint (docs/reference/oauth.md#endpoints)',
    description:
      'Authorization code flow with PKCE (`code_challenge`, `code_challenge_method=S256`; required for public apps). Parameters: `client_id`, `redirect_uri`, `response_type=code`, `scope` (default `openid profile email`), `state`, `nonce`, `prompt` (`none`, `login`, `consent`), `max_age`, `login_hint`, `ui_locales`, `session` (a session JWT, for native apps), `consent=1` (after the hosted consent page), each at most once. client_id and the exact redirect_uri are checked first: if either is wrong, an HTML error page (400) and never a redirect. Then every error redirects to redirect_uri with `error`, `error_description`, `state` and `iss` (RFC 9207). Or only `client_id` and a `request_uri` from `POST /oauth/par` (RFC 9126): used once, within 60 s, by the client that pushed it, else `invalid_request_uri` on the HTML page; other parameters are then ignored.',
    response: { 302: redirect('the app (`code` or `error`, with `state` and `iss`) or the hosted login, consent or profile page'), 303: redirect('the app or a hosted page') },
    errors: { 400: ['invalid_client', 'invalid_redirect_uri', 'invalid_request', 'invalid_request_uri'] },
  };
  // No automatic HEAD route: a HEAD must not run the flow (it would issue a code nobody receives).
  app.get('/oauth/authorize', { config: { errorStyle: 'html' }, exposeHeadRoute: false, schema: { operationId: 'authorize', ...authorizeDocs } }, (request, reply) => authorize(app, request, reply));
  app.post(
    '/oauth/authorize',
    { config: { errorStyle: 'html', acceptForm: true }, schema: { operationId: 'authorizeByPost', ...authorizeDocs, summary: 'Authorization endpoint, form-posted (OIDC Core §3.1.2.1)', consumes: ['application/x-www-form-urlencoded'], body: AuthorizeForm } },
    (request, reply) => authorizeByPost(app, request, reply));

  const tokenConfig = { errorStyle: 'oauth' as const, acceptForm: true };
  const tokenMedia = ['application/x-www-form-urlencoded', 'application/json'];
  const clientErrors = { 400: ['invalid_request'], 401: ['invalid_client'], 429: ['rate_limited'] };
  app.post(
    '/oauth/token',
    {
      config: tokenConfig,
      schema: {
        operationId: 'token',
        summary: 'Token endpoint (docs/reference/oauth.md#endpoints)',
        description:
          'A code is single use: a second redemption fails and revokes the tokens of the first. Refresh tokens rotate; the same token again within REFRESH_REUSE_GRACE gets the identical body, later it revokes its family. After 20 wrong secrets for an app from one IP within a minute, that IP gets 429 for the app until the minute ends.',
        security: OPTIONAL_CLIENT_AUTH,
        consumes: tokenMedia,
        body: TokenParams,
        response: { 200: json('Tokens (`Cache-Control: no-store`).', TokenResponse) },
        errors: {
          ...clientErrors,
          400: ['invalid_request', 'invalid_grant', 'invalid_scope', 'unsupported_grant_type', 'unauthorized_client', 'authorization_pending', 'slow_down', 'expired_token', 'access_denied'],
        },
        examples: {
          refresh: {
            summary: 'Rotate a refresh token',
            body: { grant_type: 'refresh_token', refresh_token: EXAMPLE.refreshToken, client_id: EXAMPLE.appId },
            status: 200,
            response: EXAMPLE_TOKENS,
          },
          unsupportedGrant: {
            summary: 'A grant type the server does not support',
            body: { grant_type: 'password', client_id: EXAMPLE.appId },
            status: 400,
            response: { error: 'unsupported_grant_type', error_description: 'The grant type is not supported.' },
          },
        },
      },
      onSend: namedClientCors,
    },
    (request, reply) => token(app, request, reply));
  app.post(
    '/oauth/par',
    {
      config: tokenConfig,
      schema: {
        operationId: 'pushAuthorizationRequest',
        summary: 'Pushed authorization request (RFC 9126; docs/reference/oauth.md#pushed-authorization-requests-rfc-9126)',
        description:
          'The parameters of an authorization request, checked as `/oauth/authorize` checks them, with client authentication as at `/oauth/token`; PKCE (S256) is required whatever the client type (FAPI 2.0). The answer names a `request_uri` for `/oauth/authorize?client_id=…&request_uri=…`, good once within 60 seconds. A `DPoP` proof binds the code to its key (as `dpop_jkt`). Per IP and minute, at most 120 pushes, and after 20 failed client authentications (any client ids) 429 until the oldest is a minute old.',
        security: OPTIONAL_CLIENT_AUTH,
        consumes: tokenMedia,
        body: ParParams,
        response: { 201: json('The request is stored (`Cache-Control: no-store`).', PushedRequest) },
        errors: { ...clientErrors, 400: ['invalid_request', 'invalid_scope', 'unsupported_response_type', 'unauthorized_client', 'invalid_dpop_proof'] },
      },
      onSend: namedClientCors,
    },
    (request, reply) => pushAuthorizationRequest(app, request, reply));
  app.post(
    '/oauth/device_authorization',
    {
      config: tokenConfig,
      schema: {
        operationId: 'deviceAuthorization',
        summary: 'Device authorization request (RFC 8628; docs/reference/oauth.md#device-authorization-grant-rfc-8628)',
        description:
          'For apps with `device_authorization_grant` on; client authentication as at `/oauth/token`. The device shows `user_code` and `verification_uri` (or `verification_uri_complete` as a QR code), then polls `/oauth/token` with `grant_type=urn:ietf:params:oauth:grant-type:device_code` and `device_code`, at most every `interval` seconds, until the person approves or denies on the `/device` page or the codes expire. At most 30 requests per IP per minute.',
        security: OPTIONAL_CLIENT_AUTH,
        consumes: tokenMedia,
        body: DeviceAuthorizationParams,
        response: { 200: json('The codes (`Cache-Control: no-store`).', DeviceAuthorizationResponse) },
        errors: { ...clientErrors, 400: ['invalid_request', 'invalid_scope', 'unauthorized_client'] },
      },
      onSend: namedClientCors,
    },
    (request, reply) => deviceAuthorization(app, request, reply));
  app.post(
    '/oauth/revoke',
    {
      config: tokenConfig,
      schema: {
        operationId: 'revoke',
        summary: 'Revoke a token (RFC 7009)',
        description: 'A refresh token revokes its family. 200 also for unknown tokens.',
        security: OPTIONAL_CLIENT_AUTH,
        consumes: tokenMedia,
        body: RevokeParams,
        response: { 200: noBody('Revoked (or nothing to revoke).') },
        errors: clientErrors,
        examples: { revoke: { summary: 'Revoke a refresh token', body: { token: EXAMPLE.refreshToken, client_id: EXAMPLE.appId }, status: 200 } },
      },
      onSend: namedClientCors,
    },
    (request, reply) => revoke(app, request, reply));
  app.post(
    '/oauth/introspect',
    {
      config: tokenConfig,
      schema: {
        operationId: 'introspect',
        summary: 'Introspect a token (RFC 7662)',
        description: 'For confidential apps, about their own tokens.',
        security: [{ clientBasic: [] }, {}],
        consumes: tokenMedia,
        body: IntrospectParams,
        response: { 200: json('The token state.', Introspection) },
        errors: clientErrors,
      },
    },
    (request, reply) => introspect(app, request, reply));
  const userinfoCors = corsOnSend({ unnamed: 'all-apps' });
  const userinfoDocs = {
    description: 'RFC 6750 errors with `WWW-Authenticate`; the token needs scope `openid`.',
    security: [{ accessToken: [] }],
    response: { 200: json('Claims by scope.', UserinfoClaims) },
    errors: { 401: ['invalid_token'], 403: ['insufficient_scope'] },
  };
  app.get(
    '/oauth/userinfo',
    {
      config: tokenConfig,
      onSend: userinfoCors,
      schema: {
        operationId: 'userinfo',
        summary: 'UserInfo (OIDC Core §5.3)',
        ...userinfoDocs,
        examples: { claims: { summary: 'Claims of the token user', status: 200, response: { sub: EXAMPLE.userId, email: EXAMPLE.email, email_verified: true, name: 'Ada Lovelace' } } },
      },
    },
    (request, reply) => userinfo(app, request, reply));
  app.post(
    '/oauth/userinfo',
    { config: tokenConfig, schema: { operationId: 'userinfoByPost', summary: 'UserInfo, posted (the token may be the `access_token` form field)', consumes: tokenMedia, body: UserinfoForm, ...userinfoDocs }, onSend: userinfoCors },
    (request, reply) => userinfo(app, request, reply));
  for (const url of ['/oauth/token', '/oauth/par', '/oauth/device_authorization', '/oauth/revoke', '/oauth/userinfo']) {
    app.options(url, { config: { errorStyle: 'oauth' } }, answerPreflight);
  }
}
