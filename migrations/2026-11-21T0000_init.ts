import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
// Times are epoch seconds (bigint), flags 0/1 integers, JSON as text: one schema for both dialects.

export async function up(db: Kysely<any>): Promise<void> {
  const s = db.schema;

  await s
    .createTable('developers')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('api_key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();

  await s
    .createTable('apps')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('developer_id', 'text', (c) => c.notNull().references('developers.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('client_secret_hash', 'text')
    .addColumn('redirect_uris', 'text', (c) => c.notNull())
    .addColumn('allowed_origins', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('feature_auth', 'integer', (c) => c.notNull().defaultTo(1))
    .addColumn('feature_profile', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('required_fields', 'text', (c) => c.notNull().defaultTo('[]'))
    .addColumn('disabled', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await s.createIndex('apps_developer_idx').on('apps').columns(['developer_id', 'created_at']).execute();

  await s
    .createTable('users')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('email', 'text', (c) => c.notNull().unique())
    .addColumn('email_verified', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('password_hash', 'text')
    .addColumn('name', 'text')
    .addColumn('phone_number', 'text')
    .addColumn('birthdate', 'text')
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('password_changed_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();

  await s
    .createTable('provider_identities')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('issuer', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('email', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('provider_identities_iss_sub_uq', ['issuer', 'subject'])
    .addUniqueConstraint('provider_identities_user_iss_uq', ['user_id', 'issuer'])
    .execute();

  await s
    .createTable('app_users')
    .addColumn('app_id', 'text', (c) => c.notNull().references('apps.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('status', 'text', (c) => c.notNull().defaultTo('active'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_login_at', 'bigint')
    .addPrimaryKeyConstraint('app_users_pk', ['app_id', 'user_id'])
    .execute();
  await s.createIndex('app_users_user_idx').on('app_users').column('user_id').execute();

  await s
    .createTable('consents')
    .addColumn('app_id', 'text', (c) => c.notNull().references('apps.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('consents_pk', ['app_id', 'user_id'])
    .execute();

  await s
    .createTable('browser_sessions')
    .addColumn('id_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('csrf_token', 'text', (c) => c.notNull())
    .addColumn('auth_time', 'bigint')
    .addColumn('data', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('last_seen_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await s.createIndex('browser_sessions_user_idx').on('browser_sessions').column('user_id').execute();

  await s
    .createTable('grants')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('app_id', 'text', (c) => c.notNull().references('apps.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('auth_time', 'bigint', (c) => c.notNull())
    .addColumn('nonce', 'text')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .addColumn('revoked_reason', 'text')
    .execute();
  await s.createIndex('grants_user_app_idx').on('grants').columns(['user_id', 'app_id']).execute();

  await s
    .createTable('authorization_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('app_id', 'text', (c) => c.notNull().references('apps.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('redirect_uri', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('code_challenge', 'text')
    .addColumn('nonce', 'text')
    .addColumn('auth_time', 'bigint', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('consumed_at', 'bigint')
    .addColumn('grant_id', 'text')
    .execute();

  await s
    .createTable('refresh_tokens')
    .addColumn('token_hash', 'text', (c) => c.primaryKey())
    .addColumn('grant_id', 'text', (c) => c.notNull().references('grants.id').onDelete('cascade'))
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('consumed_at', 'bigint')
    .addColumn('successor_response', 'text')
    .addColumn('successor_hash', 'text')
    .execute();
  await s.createIndex('refresh_tokens_grant_idx').on('refresh_tokens').column('grant_id').execute();

  await s
    .createTable('one_time_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.unique())
    .addColumn('code_hash', 'text')
    .addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('cascade'))
    .addColumn('email', 'text')
    .addColumn('app_id', 'text')
    .addColumn('data', 'text', (c) => c.notNull().defaultTo('{}'))
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('consumed_at', 'bigint')
    .execute();
  await s.createIndex('one_time_tokens_kind_email_idx').on('one_time_tokens').columns(['kind', 'email']).execute();
  await s.createIndex('one_time_tokens_kind_user_idx').on('one_time_tokens').columns(['kind', 'user_id']).execute();

  await s
    .createTable('profiles')
    .addColumn('app_id', 'text', (c) => c.notNull().references('apps.id').onDelete('cascade'))
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('data', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('profiles_pk', ['app_id', 'user_id'])
    .execute();

  await s
    .createTable('legal_documents')
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('doc_type', 'text', (c) => c.notNull())
    .addColumn('default_lang', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .addPrimaryKeyConstraint('legal_documents_pk', ['owner', 'doc_type'])
    .execute();

  await s
    .createTable('legal_versions')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('doc_type', 'text', (c) => c.notNull())
    .addColumn('lang', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('content', 'text', (c) => c.notNull())
    .addColumn('content_html', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addUniqueConstraint('legal_versions_uq', ['owner', 'doc_type', 'lang', 'version'])
    .execute();

  await s
    .createTable('legal_views')
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('doc_type', 'text', (c) => c.notNull())
    .addColumn('lang', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('day', 'text', (c) => c.notNull())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addPrimaryKeyConstraint('legal_views_pk', ['owner', 'doc_type', 'lang', 'version', 'day'])
    .execute();

  await s
    .createTable('legal_acceptances')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('owner', 'text', (c) => c.notNull())
    .addColumn('doc_type', 'text', (c) => c.notNull())
    .addColumn('lang', 'text', (c) => c.notNull())
    .addColumn('version', 'integer', (c) => c.notNull())
    .addColumn('accepted_at', 'bigint', (c) => c.notNull())
    .execute();
  await s.createIndex('legal_acceptances_user_idx').on('legal_acceptances').column('user_id').execute();

  await s
    .createTable('events')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('app_id', 'text')
    .addColumn('user_id', 'text')
    .addColumn('ip', 'text')
    .addColumn('user_agent', 'text')
    .addColumn('at', 'bigint', (c) => c.notNull())
    .addColumn('data', 'text', (c) => c.notNull().defaultTo('{}'))
    .execute();
  await s.createIndex('events_app_idx').on('events').columns(['app_id', 'id']).execute();

  await s
    .createTable('outbox')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('kind', 'text', (c) => c.notNull())
    .addColumn('to_address', 'text', (c) => c.notNull())
    .addColumn('subject', 'text', (c) => c.notNull())
    .addColumn('text_body', 'text', (c) => c.notNull())
    .addColumn('html_body', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_until', 'bigint')
    .addColumn('sent_at', 'bigint')
    .addColumn('last_error', 'text')
    .execute();
  await s.createIndex('outbox_pending_idx').on('outbox').columns(['sent_at', 'next_attempt_at']).execute();

  await s
    .createTable('signing_keys')
    .addColumn('kid', 'text', (c) => c.primaryKey())
    .addColumn('alg', 'text', (c) => c.notNull())
    .addColumn('public_jwk', 'text', (c) => c.notNull())
    .addColumn('private_jwk', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('retired_at', 'bigint')
    .execute();

  await s
    .createTable('throttle_counters')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('count', 'integer', (c) => c.notNull())
    .addColumn('window_start', 'bigint', (c) => c.notNull())
    .addColumn('locked_until', 'bigint')
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();

  await s
    .createTable('settings')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('value', 'text', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of [
    'settings', 'throttle_counters', 'signing_keys', 'outbox', 'events', 'legal_acceptances', 'legal_views',
    'legal_versions', 'legal_documents', 'profiles', 'one_time_tokens', 'refresh_tokens', 'authorization_codes',
    'grants', 'browser_sessions', 'consents', 'app_users', 'provider_identities', 'users', 'apps', 'developers',
  ]) {
    await db.schema.dropTable(table).ifExists().execute();
  }
}
