import type { Database } from './schema.js';

type Table = keyof Database;
type Column<T extends Table> = keyof Database[T] & string;

/**
 * Every column of table T, checked when compiled: a list that leaves one out does not typecheck, so a
 * column added to the schema is added here too. Statements name the columns they read instead of
 * `select *`, so a column that a newer version's migration adds under a running process changes none
 * of its statements' results (docs/operations/migrations.md).
 */
function everyColumn<T extends Table>() {
  return <const C extends readonly Column<T>[]>(columns: C & ([Exclude<Column<T>, C[number]>] extends [never] ? unknown : { missing: Exclude<Column<T>, C[number]> })): C => columns;
}

/** `columns` qualified by the alias (or table name) `alias`, as a joined read selects them. */
export function qualified<A extends string, C extends string>(alias: A, columns: readonly C[]): Array<`${A}.${C}`> {
  return columns.map((column) => `${alias}.${column}` as const);
}

/** The columns of each table a repo reads whole rows of, in the schema's order. */
export const COLUMNS = {
  developers: everyColumn<'developers'>()(['id', 'email', 'name', 'api_key_hash', 'created_at', 'user_id']),
  developer_api_keys: everyColumn<'developer_api_keys'>()(['id', 'developer_id', 'name', 'key_hash', 'created_at', 'revoked_at']),
  apps: everyColumn<'apps'>()(['id', 'developer_id', 'name', 'type', 'client_secret_hash', 'redirect_uris', 'allowed_origins', 'feature_auth', 'feature_profile', 'required_fields', 'mfa', 'logo_url', 'accent_color', 'logo_url_dark', 'default_locale', 'disabled', 'created_at', 'updated_at', 'dpop_bound_access_tokens', 'require_pushed_authorization_requests', 'device_authorization_grant', 'resource_uris', 'client_credentials', 'client_credentials_scopes', 'client_credentials_not_before', 'backchannel_logout_uri', 'backchannel_logout_session_required', 'password_min_length', 'password_character_classes', 'password_max_age_days', 'password_history_count', 'mail_reply_to', 'mail_overrides']),
  initial_access_tokens: everyColumn<'initial_access_tokens'>()(['id', 'developer_id', 'name', 'token_hash', 'single_use', 'created_at', 'expires_at', 'used_at', 'revoked_at']),
  client_registrations: everyColumn<'client_registrations'>()(['app_id', 'access_token_hash', 'method', 'initial_access_token_id', 'quarantined', 'created_at']),
  users: everyColumn<'users'>()(['id', 'email', 'email_verified', 'password_hash', 'name', 'phone_number', 'birthdate', 'status', 'password_changed_at', 'created_at', 'updated_at', 'deletion_scheduled_at', 'locale']),
  imported_users: everyColumn<'imported_users'>()(['user_id', 'external_id', 'imported_at']),
  provider_identities: everyColumn<'provider_identities'>()(['id', 'user_id', 'issuer', 'subject', 'email', 'created_at']),
  app_users: everyColumn<'app_users'>()(['app_id', 'user_id', 'status', 'created_at', 'last_login_at', 'email', 'name', 'user_status', 'list_status']),
  browser_sessions: everyColumn<'browser_sessions'>()(['id_hash', 'user_id', 'csrf_token', 'auth_time', 'amr', 'data', 'created_at', 'last_seen_at', 'expires_at', 'revoked_at', 'user_agent', 'ip_area', 'sid']),
  grants: everyColumn<'grants'>()(['id', 'app_id', 'user_id', 'scope', 'auth_time', 'amr', 'nonce', 'created_at', 'expires_at', 'revoked_at', 'revoked_reason', 'awaiting_completion', 'user_agent', 'ip_area', 'dpop_jkt', 'sid', 'resources']),
  authorization_codes: everyColumn<'authorization_codes'>()(['code_hash', 'app_id', 'user_id', 'redirect_uri', 'scope', 'code_challenge', 'nonce', 'auth_time', 'amr', 'created_at', 'expires_at', 'consumed_at', 'grant_id', 'user_agent', 'ip_area', 'dpop_jkt', 'sid', 'resources']),
  refresh_tokens: everyColumn<'refresh_tokens'>()(['token_hash', 'grant_id', 'app_id', 'scope', 'created_at', 'expires_at', 'consumed_at', 'successor_response', 'successor_hash']),
  one_time_tokens: everyColumn<'one_time_tokens'>()(['id', 'kind', 'token_hash', 'code_hash', 'user_id', 'email', 'app_id', 'data', 'attempts', 'created_at', 'expires_at', 'consumed_at']),
  profiles: everyColumn<'profiles'>()(['app_id', 'user_id', 'data', 'version', 'created_at', 'updated_at']),
  legal_documents: everyColumn<'legal_documents'>()(['owner', 'doc_type', 'default_lang', 'created_at', 'updated_at']),
  legal_versions: everyColumn<'legal_versions'>()(['id', 'owner', 'doc_type', 'lang', 'version', 'title', 'content', 'content_html', 'created_at']),
  legal_views: everyColumn<'legal_views'>()(['owner', 'doc_type', 'lang', 'version', 'day', 'count']),
  events: everyColumn<'events'>()(['id', 'type', 'app_id', 'user_id', 'ip', 'user_agent', 'at', 'data']),
  outbox: everyColumn<'outbox'>()(['id', 'kind', 'to_address', 'subject', 'text_body', 'html_body', 'created_at', 'attempts', 'next_attempt_at', 'locked_until', 'sent_at', 'last_error', 'reply_to']),
  signing_keys: everyColumn<'signing_keys'>()(['kid', 'alg', 'public_jwk', 'private_jwk', 'created_at', 'retired_at']),
  throttle_counters: everyColumn<'throttle_counters'>()(['key', 'count', 'window_start', 'locked_until', 'updated_at']),
  totp_factors: everyColumn<'totp_factors'>()(['user_id', 'secret_sealed', 'confirmed_at', 'last_step', 'created_at']),
  passkeys: everyColumn<'passkeys'>()(['id', 'credential_id', 'user_id', 'public_key', 'counter', 'transports', 'device_type', 'backed_up', 'name', 'app_id', 'created_at', 'last_used_at']),
  webhook_endpoints: everyColumn<'webhook_endpoints'>()(['id', 'app_id', 'url', 'description', 'event_types', 'enabled', 'secret_sealed', 'previous_secret_sealed', 'previous_secret_expires_at', 'failing_since', 'disabled_reason', 'disabled_at', 'created_at', 'updated_at']),
  webhook_deliveries: everyColumn<'webhook_deliveries'>()(['id', 'endpoint_id', 'app_id', 'event_id', 'user_id', 'type', 'payload', 'status', 'attempts', 'created_at', 'next_attempt_at', 'locked_until', 'last_attempt_at', 'last_status_code', 'last_error', 'last_response', 'delivered_at']),
  device_authorizations: everyColumn<'device_authorizations'>()(['device_code_hash', 'user_code_hash', 'app_id', 'scope', 'status', 'created_at', 'expires_at', 'poll_interval', 'polled_at', 'user_id', 'auth_time', 'amr', 'decided_at']),
  logout_deliveries: everyColumn<'logout_deliveries'>()(['id', 'app_id', 'user_id', 'sid', 'status', 'attempts', 'created_at', 'next_attempt_at', 'locked_until', 'last_attempt_at', 'last_status_code', 'last_error', 'delivered_at']),
};
