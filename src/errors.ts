/**
 * The one error type and the catalogue of machine codes (CONTRACT §2). Each code has a default HTTP
 * status and a public message; `detail` and `cause` are only ever logged, never sent.
 */
export const ERROR_CATALOGUE = {
  // CONTRACT §2 (`/v1/*`, `/oauth/idp/*`)
  invalid_request: [400, 'The request is missing a required field or has a malformed one.'],
  invalid_json: [400, 'The request body is not valid JSON.'],
  unsupported_media_type: [415, 'The request body has an unsupported content type.'],
  payload_too_large: [413, 'The request body is too large.'],
  invalid_client: [401, 'Client authentication failed or the client is unknown.'],
  invalid_redirect_uri: [400, 'The redirect_uri is not registered for this client.'],
  unauthorized: [401, 'A valid bearer credential is required.'],
  forbidden: [403, 'You are not allowed to do this.'],
  client_mismatch: [403, 'X-Client-Id does not match the client the token was issued to.'],
  feature_disabled: [403, 'This app does not have the required feature enabled.'],
  invalid_credentials: [401, 'The email or password is incorrect.'],
  user_disabled: [403, 'This account is disabled.'],
  user_blocked: [403, 'This account is blocked for this app.'],
  email_taken: [409, 'An account with this email already exists.'],
  weak_password: [400, 'The password does not meet the password policy.'],
  invalid_token: [400, 'The token is unknown, used or expired.'],
  invalid_code: [400, 'The code is incorrect.'],
  code_expired: [400, 'The code has expired or has been used up. Request a new one.'],
  rate_limited: [429, 'Too many requests. Try again later.'],
  not_found: [404, 'Not found.'],
  profile_not_found: [404, 'No profile is stored for this user and app.'],
  precondition_failed: [412, 'The resource has changed (If-Match mismatch).'],
  idp_oauth_not_configured: [503, 'Sign-in with the identity provider is not configured.'],
  idp_oauth_not_bound: [403, 'This identity-provider account is not bound to a user yet. Bind it on the account page first.'],
  invalid_id_token: [401, 'The id_token failed verification.'],
  invalid_idp_code: [401, 'The identity provider rejected the authorization code.'],
  idp_unavailable: [502, 'The identity provider could not be reached.'],
  config_from_env: [409, 'This setting comes from the environment and cannot be changed through the API.'],
  conflict: [409, 'The request conflicts with the current state.'],
  method_not_allowed: [405, 'Method not allowed.'],
  internal_error: [500, 'Internal server error.'],
  service_unavailable: [503, 'The service is temporarily unavailable.'],
  // RFC 6749 / 6750 / OIDC names, used by /oauth/* endpoints
  invalid_grant: [400, 'The grant is invalid, expired or revoked.'],
  unsupported_grant_type: [400, 'The grant type is not supported.'],
  unauthorized_client: [400, 'The client is not allowed to use this grant.'],
  invalid_scope: [400, 'The requested scope is invalid or exceeds the granted scope.'],
  unsupported_response_type: [400, 'Only response_type=code is supported.'],
  access_denied: [400, 'The user or the server denied the request.'],
  login_required: [400, 'The user must sign in.'],
  consent_required: [400, 'The user must consent.'],
  interaction_required: [400, 'User interaction is required.'],
  request_not_supported: [400, 'Request objects (the request parameter) are not supported.'],
  request_uri_not_supported: [400, 'Request objects by reference (the request_uri parameter) are not supported.'],
  insufficient_scope: [403, 'The token lacks the required scope.'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

export interface AppErrorOptions {
  status?: number;
  /** Public message; defaults to the catalogue text. Never put secrets or internals here. */
  message?: string;
  /** Private detail: logged, never sent. */
  detail?: string;
  cause?: unknown;
  /** Validation issues, sent as `details`. */
  details?: Array<{ path: string; message: string }>;
  /** Extra public body fields (`retry_after`, `attempts_left`, `hosted_url`, …). */
  extra?: Record<string, unknown>;
  headers?: Record<string, string>;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly publicMessage: string;
  readonly detail?: string;
  readonly details?: Array<{ path: string; message: string }>;
  readonly extra?: Record<string, unknown>;
  readonly headers?: Record<string, string>;

  constructor(code: ErrorCode, options: AppErrorOptions = {}) {
    const [status, message] = ERROR_CATALOGUE[code];
    super(options.detail ? `${code}: ${options.detail}` : code, options.cause ? { cause: options.cause } : undefined);
    this.name = 'AppError';
    this.code = code;
    this.status = options.status ?? status;
    this.publicMessage = options.message ?? message;
    this.detail = options.detail;
    this.details = options.details;
    this.extra = options.extra;
    this.headers = options.headers;
  }
}

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;
