import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Pushed authorization requests (RFC 9126), docs/reference/oauth.md#pushed-authorization-requests-rfc-9126. Additive:
// - `apps.require_pushed_authorization_requests`: per-app switch, 0 by default (the running version never reads it);
// - `pushed_authorization_requests`: a pushed request by the SHA-256 of its `request_uri`, single use, 60 s.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').addColumn('require_pushed_authorization_requests', 'integer', (c) => c.notNull().defaultTo(0)).execute();
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
  await db.schema.alterTable('apps').dropColumn('require_pushed_authorization_requests').execute();
}
