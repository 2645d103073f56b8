import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// DPoP (RFC 9449) and pushed authorization requests (RFC 9126), docs/reference/oauth.md. Additive:
// - `grants.dpop_jkt`: the key thumbprint a public client's refresh tokens are bound to (NULL = bearer);
// - `authorization_codes.dpop_jkt`: the key the code's redemption must prove (`dpop_jkt` at authorize);
// - `apps.dpop_bound_access_tokens`, `apps.require_pushed_authorization_requests`: per-app switches,
//   0 by default (the running version never reads them);
// - `seen_once`: keys seen once until they expire (DPoP proof `jti`s when Redis is not configured);
// - `pushed_authorization_requests`: a pushed request by the hash of its `request_uri`, single use.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('grants').addColumn('dpop_jkt', 'text').execute();
  await db.schema.alterTable('authorization_codes').addColumn('dpop_jkt', 'text').execute();
  await db.schema.alterTable('apps').addColumn('dpop_bound_access_tokens', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('apps').addColumn('require_pushed_authorization_requests', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createTable('seen_once')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('seen_once_expires_idx').on('seen_once').column('expires_at').execute();
  await db.schema
    .createTable('pushed_authorization_requests')
    .addColumn('uri_hash', 'text', (c) => c.primaryKey())
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('params', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('consumed_at', 'bigint')
    .execute();
  await db.schema.createIndex('pushed_authorization_requests_expires_idx').on('pushed_authorization_requests').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('pushed_authorization_requests').execute();
  await db.schema.dropTable('seen_once').execute();
  await db.schema.alterTable('apps').dropColumn('require_pushed_authorization_requests').execute();
  await db.schema.alterTable('apps').dropColumn('dpop_bound_access_tokens').execute();
  await db.schema.alterTable('authorization_codes').dropColumn('dpop_jkt').execute();
  await db.schema.alterTable('grants').dropColumn('dpop_jkt').execute();
}
