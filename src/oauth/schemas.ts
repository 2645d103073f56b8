import { z } from 'zod';

/**
 * Shapes of the OAuth endpoints. The handlers read parameters through `params.ts` (every parameter
 * at most once, unknown ones ignored, RFC 6749 §3.1); these schemas document and bound the bodies.
 */

/** Any form or JSON object of parameters; repeated keys arrive as arrays and are refused by the handler. */
export const ParamsBody = z.record(z.string(), z.unknown()).optional();

/**
 * POST /oauth/authorize: the authorization request form-serialized (OIDC Core §3.1.2.1), each value a
 * string; a repeated parameter arrives as an array and is refused like a repeated query parameter.
 */
export const AuthorizeForm = z.record(z.string(), z.union([z.string(), z.array(z.string())])).optional();

/** POST /oauth/userinfo: the access token may come as the `access_token` form field (RFC 6750 §2.2). */
export const UserinfoForm = z.object({ access_token: z.string().max(8192).optional() }).catchall(z.unknown()).nullish();

/** The token endpoint's body: parameters the handler reads and checks itself, in RFC 6749 order. */
export const TokenParams = ParamsBody.describe(
  '`grant_type=authorization_code`: `code`, `redirect_uri`, `client_id`, `code_verifier`; `grant_type=refresh_token`: `refresh_token`, `client_id`, optional narrower `scope`; `grant_type=client_credentials` (confidential apps that turned it on): optional `scope`; `grant_type=urn:ietf:params:oauth:grant-type:device_code`: `device_code`, `client_id`. Any grant: `resource` (RFC 8707, may repeat) narrows the access token\'s `aud`, within the resources authorized (client credentials: the app\'s declared ones). Confidential apps add `client_secret` (or use Basic). Each parameter but `resource` at most once; others are ignored.',
);
export const ParParams = ParamsBody.describe(
  'The authorization request (`response_type`, `client_id`, `redirect_uri`, `scope`, `state`, `code_challenge`, `code_challenge_method`, `nonce`, `prompt`, `max_age`, `login_hint`, `ui_locales`, `dpop_jkt`), each at most once, and `resource` (RFC 8707, may repeat); confidential apps add `client_secret` (or use Basic). Never `request_uri`.',
);
export const PushedRequest = z
  .object({
    request_uri: z.string().describe('`urn:ietf:params:oauth:request_uri:…`, for `/oauth/authorize` once.'),
    expires_in: z.number().int().describe('Seconds the request_uri stays usable (60).'),
  })
  .meta({ id: 'PushedAuthorizationResponse', description: 'RFC 9126 §2.2.' });
export const DeviceAuthorizationParams = ParamsBody.describe(
  '`client_id`, optional `scope` (default `openid profile email`; add `offline_access` for a refresh token the app keeps), each at most once; confidential apps add `client_secret` (or use Basic).',
);
export const DeviceAuthorizationResponse = z
  .object({
    device_code: z.string().describe('For the device only: it polls `/oauth/token` with it.'),
    user_code: z.string().describe('`XXXX-XXXX` from `BCDFGHJKLMNPQRSTVWXZ`, for the person to type on the `/device` page (any case, dash optional).'),
    verification_uri: z.string().describe('`{AUTH_URL}/device`.'),
    verification_uri_complete: z.string().describe('The same page with the user code filled in (for a QR code); the person still confirms it.'),
    expires_in: z.number().int().describe('Seconds both codes stay usable (600).'),
    interval: z.number().int().describe('Seconds to wait between polls (5).'),
  })
  .meta({ id: 'DeviceAuthorizationResponse', description: 'RFC 8628 §3.2.' });
export const RevokeParams = ParamsBody.describe('`token`, optional `token_type_hint`, `client_id` (and `client_secret` for confidential apps, or Basic).');
export const IntrospectParams = ParamsBody.describe('`token`, optional `token_type_hint`; the confidential app authenticates (Basic or `client_id` + `client_secret`).');

export const Introspection = z
  .object({
    active: z.boolean(),
    token_type: z.enum(['Bearer', 'DPoP', 'refresh_token']).optional(),
    cnf: z.object({ jkt: z.string() }).optional().describe('The DPoP key a bound access token needs (RFC 9449 §6.2).'),
    client_id: z.string().optional(),
    scope: z.string().optional(),
    sub: z.string().optional(),
    aud: z.union([z.string(), z.array(z.string())]).optional().describe('The app, or the resources the token was narrowed to (RFC 8707).'),
    iss: z.string().optional(),
    iat: z.number().int().optional(),
    exp: z.number().int().optional(),
    jti: z.string().optional(),
    sid: z.string().optional(),
  })
  .meta({ id: 'Introspection', description: 'RFC 7662 introspection response; only `active: false` for anything not currently valid or issued to another client.' });

export const UserinfoClaims = z
  .object({
    sub: z.string(),
    email: z.string().optional().describe('With scope `email`.'),
    email_verified: z.boolean().optional().describe('With scope `email`.'),
    name: z.string().optional().describe('With scope `profile`, when set.'),
  })
  .meta({ id: 'UserinfoClaims', description: 'OpenID Connect UserInfo claims (OIDC Core §5.3).' });

export const Discovery = z
  .looseObject({
    issuer: z.string(),
    authorization_endpoint: z.string(),
    token_endpoint: z.string(),
    jwks_uri: z.string(),
    userinfo_endpoint: z.string(),
    revocation_endpoint: z.string(),
    introspection_endpoint: z.string(),
    response_types_supported: z.array(z.string()),
    grant_types_supported: z.array(z.string()),
    code_challenge_methods_supported: z.array(z.string()),
    token_endpoint_auth_methods_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    id_token_signing_alg_values_supported: z.array(z.string()),
  })
  .meta({ id: 'Discovery', description: 'Authorization-server metadata (RFC 8414) and OpenID Provider metadata (OIDC Discovery 1.0); further members as those define.' });

export const ProtectedResourceMetadata = z
  .looseObject({
    resource: z.string().describe("Gatehouse's own resource identifier (its issuer)."),
    authorization_servers: z.array(z.string()),
    bearer_methods_supported: z.array(z.string()),
    scopes_supported: z.array(z.string()),
    dpop_signing_alg_values_supported: z.array(z.string()),
  })
  .meta({ id: 'ProtectedResourceMetadata', description: 'OAuth 2.0 Protected Resource Metadata (RFC 9728) of Gatehouse\'s own resource endpoints.' });

export const Jwks = z
  .object({ keys: z.array(z.looseObject({ kty: z.string(), kid: z.string(), alg: z.string(), use: z.string().optional() })) })
  .meta({ id: 'JWKS', description: 'The public signing keys (RFC 7517), current and retired-but-still-valid.' });

export const LogoutQuery = z.object({
  client_id: z.string().max(200).optional(),
  id_token_hint: z.string().max(4096).optional(),
  post_logout_redirect_uri: z.string().max(2000).optional(),
  state: z.string().max(4096).optional(),
  ui_locales: z.string().max(100).optional(),
});
