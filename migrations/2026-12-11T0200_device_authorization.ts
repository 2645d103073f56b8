import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// The device authorization grant (RFC 8628), docs/reference/oauth.md#device-authorization-grant-rfc-8628. Additive:
// - `apps.device_authorization_grant`: per-app switch, 0 by default (the running version never reads it);
// - `device_authorizations`: one request by the SHA-256 of its device code, its user code also only hashed;
//   pending, then approved or denied on the `/device` page, then redeemed once at the token endpoint.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').addColumn('device_authorization_grant', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createTable('device_authorizations')
    .addColumn('device_code_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_code_hash', 'text', (c) => c.notNull().unique())
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('scope', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('poll_interval', 'integer', (c) => c.notNull())
    .addColumn('polled_at', 'bigint')
    .addColumn('user_id', 'text')
    .addColumn('auth_time', 'bigint')
    .addColumn('amr', 'text')
    .addColumn('decided_at', 'bigint')
    .execute();
  await db.schema.createIndex('device_authorizations_expires_idx').on('device_authorizations').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('device_authorizations').execute();
  await db.schema.alterTable('apps').dropColumn('device_authorization_grant').execute();
}
