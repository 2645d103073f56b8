import type { ColumnType, Generated, Insertable, Selectable, Updateable } from 'kysely';

/**
 * The single typed database schema, shared by SQLite and PostgreSQL.
 * Portable types only: text ids minted by the app, integer epoch seconds, 0/1 flags, JSON as text.
 * Secrets (codes, tokens, keys) are stored only as SHA-256 hashes (`*_hash`).
 */

export interface DevelopersTable {
  id: string;
  email: string;
  name: string;
  /** The hash of the key made with the developer (also in developer_api_keys, which alone decides). */
  api_key_hash: string;
  created_at: number;
  /** The user account that signs in to the console as this developer (one each way). */
  user_id: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A developer's API keys, by SHA-256; revoked keys stay listed. */
export interface DeveloperApiKeysTable {
  id: string;
  developer_id: string;
  name: string;
  key_hash: string;
  created_at: number;
  revoked_at: number | null;
}

export interface AppsTable {
  id: string; // == client_id
  developer_id: string;
  name: string;
  type: 'public' | 'confidential';
  client_secret_hash: string | null;
  redirect_uris: string; // JSON string[]
  allowed_origins: string; // JSON string[]
  feature_auth: number;
  feature_profile: number;
  required_fields: string; // JSON string[]
  /** Second-factor policy (docs/guides/mfa-and-passkeys.md). */
  mfa: 'off' | 'optional' | 'required';
  /** Hosted-page branding: an https logo URL and a `#rrggbb` accent colour (NULL = default look). */
  logo_url: string | null;
  logo_url_dark: string | null;
  accent_color: string | null;
  /** The hosted pages' language when nothing else chooses one (a supported locale; NULL = English). */
  default_locale: string | null;
  /** OpenID Connect Back-Channel Logout: where logout tokens go (docs/guides/back-channel-logout.md); NULL: none sent. */
  backchannel_logout_uri: string | null;
  /** 1: the app needs `sid` in logout tokens (and ID tokens carry it either way). */
  backchannel_logout_session_required: ColumnType<number, number | undefined, number>;
  /** Password policy (docs/guides/password-policy.md); the rule that reads it is sign-in/password-policy.ts. */
  password_min_length: Generated<number>;
  password_character_classes: Generated<number>;
  password_max_age_days: number | null;
  password_history_count: Generated<number>;
  /** Per-app mail (docs/guides/app-mail.md): a Reply-To address, and JSON text overrides per kind and locale. */
  mail_reply_to: string | null;
  mail_overrides: Generated<string>;
  disabled: number;
  created_at: number;
  updated_at: number;
  /** 1: every token request and sign-in of this app must carry a DPoP proof (RFC 9449 §5.2). */
  dpop_bound_access_tokens: number;
  /** 1: authorization requests only by reference to a pushed one (RFC 9126 §6). */
  require_pushed_authorization_requests: number;
  /** 1: the app may use the device authorization grant (RFC 8628). */
  device_authorization_grant: number;
  /** JSON string[]: the APIs (RFC 8707 resource URIs) the app may ask tokens for. */
  resource_uris: Generated<string>;
  /** 1: the app may use grant_type=client_credentials (confidential apps only). */
  client_credentials: Generated<number>;
  /** The scopes a client-credentials token may carry (space-separated). */
  client_credentials_scopes: Generated<string>;
  /** Client-credentials tokens issued at or before this time are revoked (RFC 7009 at /oauth/revoke); null: none. */
  client_credentials_not_before: ColumnType<number | null, number | null | undefined, number | null>;
}

export interface UsersTable {
  id: string;
  email: string; // normalised (trimmed, lowercased), unique
  email_verified: number;
  password_hash: string | null;
  name: string | null;
  phone_number: string | null;
  birthdate: string | null;
  status: 'active' | 'disabled';
  password_changed_at: number | null;
  created_at: number;
  updated_at: number;
  /** When the account is purged (docs/account/deletion.md); NULL: no deletion scheduled. */
  deletion_scheduled_at: ColumnType<number | null, number | null | undefined, number | null>;
  /** The person's language for hosted pages and mails, chosen with the language switcher (NULL = none). */
  locale: ColumnType<string | null, string | null | undefined, string | null>;
}

/** A user created by a bulk import, with the id it had where it came from (docs/guides/migrating-users.md). */
export interface ImportedUsersTable {
  user_id: string;
  /** Unique when given: importing the same file again finds the user by it. */
  external_id: string | null;
  imported_at: number;
}

/** A provider account bound to a user, keyed by the provider's (issuer, subject), never by email. */
export interface ProviderIdentitiesTable {
  id: string;
  user_id: string;
  issuer: string;
  subject: string;
  email: string | null;
  created_at: number;
}

/** Users of an app (made by a completed sign-in), with the developer-controlled status. */
export interface AppUsersTable {
  app_id: string;
  user_id: string;
  status: 'active' | 'blocked';
  created_at: number;
  last_login_at: number | null;
  /** Denormalised from users by database triggers (listing at scale, migration 0100): never write these. */
  email: Generated<string>;
  name: Generated<string | null>;
  user_status: Generated<'active' | 'disabled'>;
  /** What the developer listing shows: 'disabled' (platform-wide) wins over the app's own status. */
  list_status: Generated<'active' | 'blocked' | 'disabled'>;
}

/** Exact member counts per (app, list_status), kept by triggers (summed over shards). */
export interface AppUserCountsTable {
  app_id: string;
  list_status: string;
  shard: number;
  n: number;
}

export interface ConsentsTable {
  app_id: string;
  user_id: string;
  scope: string; // space-separated, sorted
  created_at: number;
  updated_at: number;
}

/** Hosted-page browser sessions. `id_hash` is the SHA-256 of the opaque cookie value. */
export interface BrowserSessionsTable {
  id_hash: string;
  user_id: string | null;
  csrf_token: string;
  auth_time: number | null;
  /** JSON RFC 8176 `amr` values of the authentication at `auth_time`. */
  amr: string | null;
  data: string; // JSON: in-flight page state (e.g. the authorize request to resume)
  created_at: number;
  last_seen_at: number;
  expires_at: number;
  revoked_at: number | null;
  /** The user agent it was created from (at most 512 characters); null before 2026-12-08T0200_sessions. */
  user_agent: string | null;
  /** The coarse area of the address it was created from (shared/ip-area.ts), never the full address. */
  ip_area: string | null;
  /** The public session id (`sid`) of ID and logout tokens (docs/guides/back-channel-logout.md); null before 2026-12-09T0200_backchannel_logout. */
  sid: string | null;
}

/** A grant (`sid`): one sign-in of a user to an app; refresh-token families and session JWTs hang off it. */
export interface GrantsTable {
  id: string;
  app_id: string;
  user_id: string;
  scope: string;
  auth_time: number;
  /** JSON RFC 8176 `amr` values of the authentication at `auth_time`. */
  amr: string | null;
  nonce: string | null;
  created_at: number;
  expires_at: number; // absolute lifetime of the family
  revoked_at: number | null;
  revoked_reason: string | null;
  /** 1 while a REST sign-in on this grant is `pending` (profile data or email verification). */
  awaiting_completion: ColumnType<number, number | undefined, number>;
  /** The user agent it was created from (at most 512 characters); null before 2026-12-08T0200_sessions. */
  user_agent: string | null;
  /** The coarse area of the address it was created from (shared/ip-area.ts), never the full address. */
  ip_area: string | null;
  /** The DPoP key thumbprint its refresh tokens are bound to (public clients, RFC 9449 §5); null = bearer. */
  dpop_jkt: string | null;
  /** The public session id (`sid`) of ID and logout tokens (docs/guides/back-channel-logout.md); null before 2026-12-09T0200_backchannel_logout. */
  sid: string | null;
  /** The resources (RFC 8707) its authorization named, space-separated; null: none, tokens are for the app itself. */
  resources: string | null;
}

export interface AuthorizationCodesTable {
  code_hash: string;
  app_id: string;
  user_id: string;
  redirect_uri: string;
  scope: string;
  code_challenge: string | null;
  nonce: string | null;
  auth_time: number;
  amr: string | null;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
  /** The grant its redemption created, so a replay can revoke what the code produced. */
  grant_id: string | null;
  /** The user agent it was created from (at most 512 characters); null before 2026-12-08T0200_sessions. */
  user_agent: string | null;
  /** The coarse area of the address it was created from (shared/ip-area.ts), never the full address. */
  ip_area: string | null;
  /** The DPoP key thumbprint the redemption must prove (`dpop_jkt` at authorize, RFC 9449 §10); null = any. */
  dpop_jkt: string | null;
  /** The public session id (`sid`) of ID and logout tokens (docs/guides/back-channel-logout.md); null before 2026-12-09T0200_backchannel_logout. */
  sid: string | null;
  /** The resources (RFC 8707) the authorization request named, space-separated; null: none. */
  resources: string | null;
}

export interface RefreshTokensTable {
  token_hash: string;
  grant_id: string;
  app_id: string;
  scope: string;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
  /** Sealed token response of the rotation, replayed identically inside REFRESH_REUSE_GRACE. */
  successor_response: string | null;
  successor_hash: string | null;
}

/**
 * Single-use secrets of every other kind: magic links (+ their 6-digit code), password resets,
 * email verification codes, `/continue` tickets, provider sign-in transactions, replayed id_tokens.
 */
export interface OneTimeTokensTable {
  id: string;
  kind: string;
  token_hash: string | null;
  code_hash: string | null;
  user_id: string | null;
  email: string | null;
  app_id: string | null;
  data: string; // JSON
  attempts: number;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
}

export interface ProfilesTable {
  app_id: string;
  user_id: string;
  data: string; // JSON object
  version: number;
  created_at: number;
  updated_at: number;
}

/** `owner` is 'platform' or an app id. */
export interface LegalDocumentsTable {
  owner: string;
  doc_type: string;
  default_lang: string;
  created_at: number;
  updated_at: number;
}

export interface LegalVersionsTable {
  id: string;
  owner: string;
  doc_type: string;
  lang: string;
  version: number;
  title: string;
  content: string;
  content_html: string;
  created_at: number;
}

export interface LegalViewsTable {
  owner: string;
  doc_type: string;
  lang: string;
  version: number;
  day: string; // YYYY-MM-DD
  count: number;
}

export interface LegalAcceptancesTable {
  id: string;
  user_id: string;
  owner: string;
  doc_type: string;
  lang: string;
  version: number;
  accepted_at: number;
}

export interface EventsTable {
  id: string; // time-ordered: the cursor
  type: string;
  app_id: string | null;
  user_id: string | null;
  ip: string | null;
  user_agent: string | null;
  at: number;
  data: string; // JSON; never a password, token, code or secret
}

export interface OutboxTable {
  id: string;
  kind: string;
  to_address: string;
  subject: string;
  text_body: string; // sealed with SECRET_KEY: bodies carry links and codes
  html_body: string; // sealed
  created_at: number;
  attempts: number;
  next_attempt_at: number;
  locked_until: number | null;
  sent_at: number | null;
  last_error: string | null;
  /** The app's Reply-To address, when the mail was caused through an app that set one. */
  reply_to: string | null;
}

/** A person's previous password hashes (argon2id PHC strings), for the reuse rule; bounded per user. */
export interface PasswordHistoryTable {
  id: string;
  user_id: string;
  password_hash: string;
  created_at: number;
}

export interface SigningKeysTable {
  kid: string;
  alg: 'ES256' | 'RS256';
  public_jwk: string;
  private_jwk: string; // sealed with SECRET_KEY
  created_at: number;
  retired_at: number | null;
}

export interface ThrottleCountersTable {
  key: string;
  count: number;
  window_start: number;
  locked_until: number | null;
  updated_at: number;
}

/** A user's authenticator app (RFC 6238). The secret is sealed with SECRET_KEY; `last_step` makes each code single-use. */
export interface TotpFactorsTable {
  user_id: string;
  secret_sealed: string;
  /** Null until the user proved the app works by entering a first code. */
  confirmed_at: number | null;
  last_step: number | null;
  created_at: number;
}

/** One-time recovery codes (SHA-256 hashes). */
export interface RecoveryCodesTable {
  code_hash: string;
  user_id: string;
  created_at: number;
  used_at: number | null;
}

/** Small key/value settings, e.g. the provider configuration set through the admin API. */
export interface SettingsTable {
  key: string;
  value: string; // JSON
  updated_at: number;
}

/** A passkey (WebAuthn credential) of a user; `credential_id` and `public_key` are base64url. */
export interface PasskeysTable {
  id: string;
  credential_id: string;
  user_id: string;
  public_key: string; // COSE public key
  counter: number; // signature counter, advanced on every use
  transports: string; // JSON string[]
  device_type: 'singleDevice' | 'multiDevice';
  backed_up: number;
  name: string; // given by the user
  /** The app whose access token registered it: it signs in only there and is no second factor. NULL: account-wide. */
  app_id: string | null;
  created_at: number;
  last_used_at: number | null;
}

/** A developer's webhook endpoint for one app (docs/webhooks.md). */
export interface WebhookEndpointsTable {
  id: string;
  app_id: string;
  url: string;
  description: string | null;
  event_types: string; // JSON string[]; [] = every type
  enabled: number;
  /** `whsec_…` sealed with SECRET_KEY. */
  secret_sealed: string;
  /** The secret before the last rotation, still signing until `previous_secret_expires_at`. */
  previous_secret_sealed: string | null;
  previous_secret_expires_at: number | null;
  /** When the current run of failed attempts began (NULL after a success). */
  failing_since: number | null;
  /** Why the server disabled it ('failing'), NULL when a developer did (or it is enabled). */
  disabled_reason: string | null;
  disabled_at: number | null;
  created_at: number;
  updated_at: number;
}

/** One message to one endpoint: its `id` is the `webhook-id`, the same on every attempt. */
export interface WebhookDeliveriesTable {
  id: string;
  endpoint_id: string;
  app_id: string;
  /** The audit event it reports (NULL for a test event). */
  event_id: string | null;
  /** The user it is about (NULL for a test event). */
  user_id: string | null;
  type: string;
  payload: string; // the JSON body sent, `{type, timestamp, data}`
  status: 'pending' | 'delivered' | 'failed';
  attempts: number;
  created_at: number;
  next_attempt_at: number;
  locked_until: number | null;
  last_attempt_at: number | null;
  last_status_code: number | null;
  last_error: string | null;
  /** The start of the last response body (at most a few hundred characters). */
  last_response: string | null;
  delivered_at: number | null;
}

/** Keys seen once, until they expire (DPoP proof `jti`s when Redis is not configured). */
export interface SeenOnceTable {
  key: string;
  expires_at: number;
}

/** One logout token to send to one app (docs/guides/back-channel-logout.md): its `id` is the token's `jti`. */
export interface LogoutDeliveriesTable {
  id: string;
  app_id: string;
  user_id: string;
  /** The session the token names; NULL: every session of the user at the app. */
  sid: string | null;
  status: 'pending' | 'delivered' | 'failed';
  attempts: ColumnType<number, number | undefined, number>;
  created_at: number;
  next_attempt_at: number;
  locked_until: ColumnType<number | null, number | null | undefined, number | null>;
  last_attempt_at: ColumnType<number | null, number | null | undefined, number | null>;
  last_status_code: ColumnType<number | null, number | null | undefined, number | null>;
  last_error: ColumnType<string | null, string | null | undefined, string | null>;
  delivered_at: ColumnType<number | null, number | null | undefined, number | null>;
}

/** A pushed authorization request (RFC 9126): its parameters as JSON, by the SHA-256 of its `request_uri`. */
export interface PushedAuthorizationRequestsTable {
  uri_hash: string;
  app_id: string;
  params: string;
  created_at: number;
  expires_at: number;
  consumed_at: number | null;
}

/** An initial access token (RFC 7591 §3): a developer's permission to register clients in their name, by SHA-256. */
export interface InitialAccessTokensTable {
  id: string;
  developer_id: string;
  name: string;
  token_hash: string;
  /** 1: good for one registration. */
  single_use: number;
  created_at: number;
  expires_at: number;
  used_at: number | null;
  revoked_at: number | null;
}

/** How a client registered itself (RFC 7591/7592): its registration access token by SHA-256, and whether it awaits approval. */
export interface ClientRegistrationsTable {
  app_id: string;
  access_token_hash: string;
  /** 'initial_access_token' | 'open'. */
  method: 'initial_access_token' | 'open';
  initial_access_token_id: string | null;
  /** 1: registered openly and not yet approved (the app is disabled meanwhile). */
  quarantined: number;
  created_at: number;
}

/**
 * A device authorization request (RFC 8628) by the SHA-256 of its device code; the user code is only
 * stored hashed too. `status`: pending → approved | denied (the `/device` page) → redeemed (the token endpoint).
 */
export interface DeviceAuthorizationsTable {
  device_code_hash: string;
  user_code_hash: string;
  app_id: string;
  scope: string;
  status: 'pending' | 'approved' | 'denied' | 'redeemed';
  created_at: number;
  expires_at: number;
  /** Seconds the device must wait between polls; +5 at every `slow_down` (RFC 8628 §3.5). */
  poll_interval: number;
  polled_at: number | null;
  /** Who approved or denied, and how they authenticated (the grant's `auth_time` and `amr`). */
  user_id: string | null;
  auth_time: number | null;
  amr: string | null;
  decided_at: number | null;
}

export interface Database {
  developers: DevelopersTable;
  developer_api_keys: DeveloperApiKeysTable;
  apps: AppsTable;
  users: UsersTable;
  imported_users: ImportedUsersTable;
  provider_identities: ProviderIdentitiesTable;
  app_users: AppUsersTable;
  app_user_counts: AppUserCountsTable;
  consents: ConsentsTable;
  browser_sessions: BrowserSessionsTable;
  grants: GrantsTable;
  authorization_codes: AuthorizationCodesTable;
  refresh_tokens: RefreshTokensTable;
  one_time_tokens: OneTimeTokensTable;
  profiles: ProfilesTable;
  legal_documents: LegalDocumentsTable;
  legal_versions: LegalVersionsTable;
  legal_views: LegalViewsTable;
  legal_acceptances: LegalAcceptancesTable;
  events: EventsTable;
  outbox: OutboxTable;
  signing_keys: SigningKeysTable;
  throttle_counters: ThrottleCountersTable;
  seen_once: SeenOnceTable;
  pushed_authorization_requests: PushedAuthorizationRequestsTable;
  initial_access_tokens: InitialAccessTokensTable;
  client_registrations: ClientRegistrationsTable;
  device_authorizations: DeviceAuthorizationsTable;
  settings: SettingsTable;
  totp_factors: TotpFactorsTable;
  recovery_codes: RecoveryCodesTable;
  passkeys: PasskeysTable;
  webhook_endpoints: WebhookEndpointsTable;
  webhook_deliveries: WebhookDeliveriesTable;
  logout_deliveries: LogoutDeliveriesTable;
  password_history: PasswordHistoryTable;
}

export type AppRow = Selectable<AppsTable>;
export type NewApp = Insertable<AppsTable>;
export type AppPatch = Updateable<AppsTable>;
export type UserRow = Selectable<UsersTable>;
export type NewUser = Insertable<UsersTable>;
export type GrantRow = Selectable<GrantsTable>;
export type RefreshTokenRow = Selectable<RefreshTokensTable>;
export type OneTimeTokenRow = Selectable<OneTimeTokensTable>;
export type BrowserSessionRow = Selectable<BrowserSessionsTable>;
export type DeveloperRow = Selectable<DevelopersTable>;
export type DeveloperApiKeyRow = Selectable<DeveloperApiKeysTable>;
export type EventRow = Selectable<EventsTable>;
export type OutboxRow = Selectable<OutboxTable>;
export type SigningKeyRow = Selectable<SigningKeysTable>;
export type WebhookEndpointRow = Selectable<WebhookEndpointsTable>;
export type WebhookDeliveryRow = Selectable<WebhookDeliveriesTable>;
export type LogoutDeliveryRow = Selectable<LogoutDeliveriesTable>;
