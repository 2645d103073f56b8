/**
 * The one error type and the catalogue of machine codes (docs/reference/errors.md). Each code has a default HTTP
 * status and a public message; `detail` and `cause` are only ever logged, never sent.
 */
export const ERROR_CATALOGUE = {
  // `/v1/*`, `/oauth/idp/*` and the hosted pages
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
  account_deletion_scheduled: [403, 'This account is scheduled for deletion. Sign in with cancel_deletion set to keep it.'],
  weak_password: [400, 'The password does not meet the password policy.'],
  password_expired: [403, 'The password has expired: choose a new one.'],
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
  request_timeout: [408, 'The request did not arrive in time.'],
  uri_too_long: [414, 'A path segment of the request is too long.'],
  headers_too_large: [431, 'The request headers are too large.'],
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
  invalid_dpop_proof: [400, 'The DPoP proof is missing, invalid, replayed, or made with another key than the token or code is bound to.'],
  use_dpop_nonce: [400, 'The DPoP proof must carry the nonce from the DPoP-Nonce response header.'],
  invalid_client_metadata: [400, 'A client metadata value is invalid or not supported.'],
  invalid_target: [400, 'The requested resource is unknown, not allowed for this client, or not among those authorized.'],
  invalid_request_uri: [400, 'The request_uri is unknown, used, expired, or was pushed by another client.'],
  authorization_pending: [400, 'The person has not approved or denied the request on the device page yet.'],
  slow_down: [400, 'Polling faster than the interval: wait 5 seconds more between polls from now on.'],
  expired_token: [400, 'The device code has expired: start a new device authorization.'],
} as const satisfies Record<string, readonly [number, string]>;

export type ErrorCode = keyof typeof ERROR_CATALOGUE;

/**
 * Why exactly a request failed, for the developer integrating an app (issue 15 "developer feedback").
 * Outside production the response text is the reason's (`describeError`); production keeps the code's
 * generic message, which tells a guesser nothing about which check failed. English, and Simplified
 * Chinese for the hosted error page. The English text goes into `error_description`, so it keeps to
 * the characters RFC 6749 §5.2 allows there (printable ASCII without `"` and `\`).
 */
export const ERROR_REASONS = {
  // POST /oauth/token, grant_type=authorization_code
  code_unknown: {
    en: 'The authorization code is unknown: it was never issued by this server, or it was mistyped or truncated.',
    'zh-CN': '授权码无效：它不是本服务签发的，或被输错、截断。',
  },
  code_other_client: {
    en: 'The authorization code was issued to another client_id; redeem it with the client that sent the authorization request.',
    'zh-CN': '该授权码签发给了另一个 client_id；请用发起授权请求的客户端兑换。',
  },
  code_expired: {
    en: 'The authorization code has expired: codes are valid for 60 seconds, so redeem them at once.',
    'zh-CN': '授权码已过期：授权码有效期为 60 秒，请立即兑换。',
  },
  code_replayed: {
    en: 'The authorization code was already used: codes are single-use (a failed redemption uses one up too), and any tokens it produced have been revoked.',
    'zh-CN': '授权码已被使用：授权码只能使用一次（兑换失败也会消耗它），它签发的令牌已被吊销。',
  },
  redirect_uri_mismatch: {
    en: 'redirect_uri differs from the one sent to /oauth/authorize: the token request must send the identical string.',
    'zh-CN': 'redirect_uri 与 /oauth/authorize 请求中的不同：令牌请求必须发送完全相同的字符串。',
  },
  code_verifier_missing: {
    en: 'code_verifier is missing: the authorization request sent a code_challenge, so the token request must send its code_verifier (PKCE, RFC 7636).',
    'zh-CN': '缺少 code_verifier：授权请求带了 code_challenge，令牌请求必须发送对应的 code_verifier（PKCE，RFC 7636）。',
  },
  code_verifier_mismatch: {
    en: 'code_verifier does not match the code_challenge of the authorization request: the challenge must be BASE64URL(SHA-256(code_verifier)) without padding.',
    'zh-CN': 'code_verifier 与授权请求的 code_challenge 不匹配：challenge 必须是 BASE64URL(SHA-256(code_verifier))，不带填充。',
  },
  code_verifier_unexpected: {
    en: 'code_verifier was sent, but the authorization request had no code_challenge: send both or neither.',
    'zh-CN': '发送了 code_verifier，但授权请求没有 code_challenge：两者要么都发送，要么都不发送。',
  },
  code_verifier_malformed: {
    en: 'code_verifier is malformed: it must be 43 to 128 characters, each a letter, a digit or one of - . _ ~ (RFC 7636 section 4.1).',
    'zh-CN': 'code_verifier 格式错误：必须是 43 到 128 个 A-Z、a-z、0-9、"-"、"."、"_"、"~" 字符（RFC 7636 §4.1）。',
  },
  user_disabled: {
    en: 'The user has been disabled by the operator, so no code or refresh token of theirs redeems.',
    'zh-CN': '该用户已被管理员停用，其授权码和刷新令牌都无法使用。',
  },
  user_blocked: {
    en: "The user has been blocked for this app by its developer, so no code or refresh token of theirs redeems.",
    'zh-CN': '该用户已被此应用的开发者封禁，其授权码和刷新令牌都无法使用。',
  },
  account_deletion_scheduled: {
    en: 'The user asked to delete their account after the code was issued; signing in again (and keeping the account) issues new ones.',
    'zh-CN': '签发授权码后，用户申请了删除账号；重新登录（并保留账号）后才会签发新的授权码。',
  },
  user_gone: {
    en: 'The user the code was issued for no longer exists.',
    'zh-CN': '授权码对应的用户已不存在。',
  },
  consent_revoked: {
    en: 'The user withdrew consent for this app after the code was issued.',
    'zh-CN': '签发授权码后，用户撤回了对此应用的授权。',
  },
  password_changed: {
    en: "The user's password changed after the code was issued.",
    'zh-CN': '签发授权码后，用户修改了密码。',
  },
  // POST /oauth/token, grant_type=refresh_token (and /v1/auth/refresh)
  refresh_token_unknown: {
    en: 'The refresh token is unknown: it was never issued by this server, was mistyped, or was purged after it expired.',
    'zh-CN': '刷新令牌无效：它不是本服务签发的，或被输错，或过期后已被清除。',
  },
  refresh_token_other_client: {
    en: 'The refresh token was issued to another client_id.',
    'zh-CN': '该刷新令牌签发给了另一个 client_id。',
  },
  refresh_token_expired: {
    en: 'The refresh token has expired (REFRESH_TOKEN_TTL); the user must sign in again.',
    'zh-CN': '刷新令牌已过期（REFRESH_TOKEN_TTL）；用户需要重新登录。',
  },
  refresh_token_revoked: {
    en: "The refresh token's grant was revoked (sign-out, password reset, blocking, code replay) or reached its maximum lifetime (REFRESH_FAMILY_TTL); the user must sign in again.",
    'zh-CN': '刷新令牌所属的授权已被吊销（登出、重置密码、封禁、授权码重放）或已达最长有效期（REFRESH_FAMILY_TTL）；用户需要重新登录。',
  },
  refresh_token_reused: {
    en: 'The refresh token was already rotated and was presented again after the grace window (REFRESH_REUSE_GRACE), so its whole family was revoked (reuse detection). Always keep the newest refresh token.',
    'zh-CN': '该刷新令牌已轮换过，并在宽限期（REFRESH_REUSE_GRACE）后再次出现，因此整个令牌族已被吊销（重用检测）。请始终保存最新的刷新令牌。',
  },
  // Client identification (authorize, token, revoke, introspect)
  client_unknown: {
    en: 'No app has this client_id: check it for typos, or create the app (console, POST /v1/dev/apps or `gatehouse app create`).',
    'zh-CN': '没有应用使用此 client_id：请检查拼写，或先创建应用（控制台、POST /v1/dev/apps 或 `gatehouse app create`）。',
  },
  client_disabled: {
    en: 'This app is disabled; enable it again before signing users in.',
    'zh-CN': '此应用已停用；请先重新启用它。',
  },
  client_secret_missing: {
    en: 'This app is confidential: authenticate with its client_secret (HTTP Basic, or client_secret in the body).',
    'zh-CN': '此应用是机密客户端：请用 client_secret 认证（HTTP Basic，或在请求体中发送 client_secret）。',
  },
  client_secret_wrong: {
    en: 'The client_secret is wrong (rotating the secret invalidates the previous one).',
    'zh-CN': 'client_secret 错误（轮换密钥后旧密钥即失效）。',
  },
  client_secret_unexpected: {
    en: 'This app is public and has no secret: send client_id only, without client_secret or HTTP Basic.',
    'zh-CN': '此应用是公共客户端，没有密钥：只发送 client_id，不要发送 client_secret 或 HTTP Basic。',
  },
  // Password checks (login, registration, password reset and change)
  password_checks_overloaded: {
    en: 'Password checks are waiting longer than PASSWORD_MAX_WAIT_MS for their turn: the server is overloaded. Nothing was checked and no attempt was counted; retry after Retry-After seconds.',
    'zh-CN': '密码校验排队时间超过 PASSWORD_MAX_WAIT_MS：服务器过载。本次未校验密码，也未计入尝试次数；请在 Retry-After 秒后重试。',
  },
  // GET /oauth/authorize, before any redirect is possible
  redirect_uri_not_registered: {
    en: "The redirect_uri is not one of this app's registered redirect URIs. It must equal a registered value exactly, character for character: same scheme, host, port, path, trailing slash and query. Register it in the console or with PATCH /v1/dev/apps/{id}.",
    'zh-CN': 'redirect_uri 不在此应用已登记的重定向地址中。它必须与某个登记值逐字符完全相同：协议、主机、端口、路径、结尾斜杠和查询串都一致。请在控制台或通过 PATCH /v1/dev/apps/{id} 登记。',
  },
} as const satisfies Record<string, { en: string; 'zh-CN': string }>;

export type ErrorReason = keyof typeof ERROR_REASONS;

export interface AppErrorOptions {
  status?: number;
  /** Public message; defaults to the catalogue text. Never put secrets or internals here. */
  message?: string;
  /** Private detail: logged, never sent. */
  detail?: string;
  /** The exact reason, told to developers outside production (`describeError`); also logged. */
  reason?: ErrorReason;
  cause?: unknown;
  /** Validation issues, sent as `details`. */
  details?: Array<{ path: string; message: string }>;
  /** Extra public body fields (`retry_after`, `attempts_left`, `hosted_url`, …). */
  extra?: Record<string, unknown>;
  headers?: Record<string, string>;
  /** The hosted pages' message key that says this refusal better than its code's (views/locales). */
  messageKey?: string;
}

export class AppError extends Error {
  readonly code: ErrorCode;
  readonly status: number;
  readonly publicMessage: string;
  readonly detail?: string;
  readonly reason?: ErrorReason;
  readonly details?: Array<{ path: string; message: string }>;
  readonly extra?: Record<string, unknown>;
  readonly headers?: Record<string, string>;
  readonly messageKey?: string;

  constructor(code: ErrorCode, options: AppErrorOptions = {}) {
    const [status, message] = ERROR_CATALOGUE[code];
    const detail = options.detail ?? options.reason;
    super(detail ? `${code}: ${detail}` : code, options.cause ? { cause: options.cause } : undefined);
    this.name = 'AppError';
    this.code = code;
    this.status = options.status ?? status;
    this.publicMessage = options.message ?? message;
    this.detail = detail;
    this.reason = options.reason;
    this.details = options.details;
    this.extra = options.extra;
    this.headers = options.headers;
    this.messageKey = options.messageKey;
  }
}

export const isAppError = (e: unknown): e is AppError => e instanceof AppError;

/**
 * The text a response carries for an error: outside production its exact reason, when it has one
 * (developers need to know which check failed); in production the public message. The one mapping
 * every response style uses (plugins/error-handler.ts, the hosted error page).
 */
export function describeError(error: AppError, options: { production: boolean; locale?: 'en' | 'zh-CN' }): string {
  if (options.production || !error.reason) return error.publicMessage;
  return ERROR_REASONS[error.reason][options.locale ?? 'en'];
}
