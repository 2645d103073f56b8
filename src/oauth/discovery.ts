import { ACR_VALUES_SUPPORTED } from '../shared/acr.js';
import { SUPPORTED_SCOPES } from '../shared/scopes.js';
import { LOCALES } from '../plugins/i18n.js';
import { DPOP_SIGNING_ALGS } from '../tokens/index.js';

/**
 * Authorization-server metadata (RFC 8414) and OpenID Provider metadata (OIDC Discovery 1.0): one
 * document served at both well-known paths (docs/reference/oauth.md#endpoints). Every endpoint lives under {base_url}.
 */
export function discoveryDocument(baseUrl: string, options: { registration: boolean } = { registration: false }) {
  const endpoint = (path: string) => `${baseUrl}${path}`;
  const clientAuthMethods = ['none', 'client_secret_basic', 'client_secret_post'];
  return {
    issuer: baseUrl,
    authorization_endpoint: endpoint('/oauth/authorize'),
    token_endpoint: endpoint('/oauth/token'),
    jwks_uri: endpoint('/oauth/jwks'),
    userinfo_endpoint: endpoint('/oauth/userinfo'),
    revocation_endpoint: endpoint('/oauth/revoke'),
    introspection_endpoint: endpoint('/oauth/introspect'),
    end_session_endpoint: endpoint('/oauth/logout'),
    response_types_supported: ['code'],
    response_modes_supported: ['query'],
    grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'],
    code_challenge_methods_supported: ['S256'],
    token_endpoint_auth_methods_supported: clientAuthMethods,
    revocation_endpoint_auth_methods_supported: clientAuthMethods,
    // Introspection is for confidential apps only.
    introspection_endpoint_auth_methods_supported: ['client_secret_basic', 'client_secret_post'],
    scopes_supported: [...SUPPORTED_SCOPES],
    claims_supported: ['iss', 'sub', 'aud', 'exp', 'iat', 'auth_time', 'acr', 'amr', 'nonce', 'sid', 'email', 'email_verified', 'name'],
    // Claims follow the scopes; the `claims` request parameter is ignored (OIDC Core §5.5 lets an OP say so).
    claims_parameter_supported: false,
    acr_values_supported: ACR_VALUES_SUPPORTED,
    subject_types_supported: ['public'],
    id_token_signing_alg_values_supported: ['RS256', 'ES256'],
    prompt_values_supported: ['none', 'login', 'consent'],
    // Parameters come only from the request itself (OIDC Core §6): `request` / `request_uri` are refused.
    request_parameter_supported: false,
    request_uri_parameter_supported: false,
    ui_locales_supported: [...LOCALES],
    authorization_response_iss_parameter_supported: true,
    // RFC 9449 §5.1: proofs are accepted with these (asymmetric) algorithms.
    dpop_signing_alg_values_supported: [...DPOP_SIGNING_ALGS],
    // OpenID Connect Back-Channel Logout 1.0 (docs/guides/back-channel-logout.md); ID tokens carry `sid`.
    backchannel_logout_supported: true,
    backchannel_logout_session_supported: true,
    // RFC 9126 §5: pushed authorization requests; an app may require them (require_pushed_authorization_requests).
    pushed_authorization_request_endpoint: endpoint('/oauth/par'),
    require_pushed_authorization_requests: false,
    // RFC 8628 §4: the device authorization grant, for apps that turn it on (device_authorization_grant).
    device_authorization_endpoint: endpoint('/oauth/device_authorization'),
    // RFC 7591 §3: only when the operator turns dynamic client registration on (DYNAMIC_REGISTRATION=1).
    ...(options.registration ? { registration_endpoint: endpoint('/oauth/register') } : {}),
  };
}

/**
 * Protected-resource metadata (RFC 9728 §2) of Gatehouse's own resource endpoints (`/oauth/userinfo`,
 * `/v1/profile`), docs/reference/oauth.md#protected-resource-metadata-rfc-9728: the resource is the issuer.
 * An app's API publishes the same shape for itself (docs/guides/protect-an-api.md).
 */
export function protectedResourceDocument(baseUrl: string) {
  return {
    resource: baseUrl,
    authorization_servers: [baseUrl],
    bearer_methods_supported: ['header'],
    scopes_supported: ['openid', 'profile', 'email'],
    dpop_signing_alg_values_supported: [...DPOP_SIGNING_ALGS],
  };
}
