import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Dynamic client registration (RFC 7591/7592), docs/reference/oauth.md#dynamic-client-registration-rfc-7591. Additive:
// - `initial_access_tokens`: what a developer hands out to register clients in their name, by SHA-256;
// - `client_registrations`: the registration access token (SHA-256) and quarantine of a client that
//   registered itself. A quarantined app is also stored with `apps.disabled = 1`, so a running older
//   version, which never reads this table, refuses it too.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('initial_access_tokens')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('developer_id', 'text', (c) => c.notNull().references('developers.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('single_use', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('initial_access_tokens_developer_idx').on('initial_access_tokens').columns(['developer_id', 'created_at']).execute();
  await db.schema
    .createTable('client_registrations')
    .addColumn('app_id', 'text', (c) => c.primaryKey().references('apps.id').onDelete('cascade'))
    .addColumn('access_token_hash', 'text', (c) => c.notNull().unique())
    .addColumn('method', 'text', (c) => c.notNull())
    .addColumn('initial_access_token_id', 'text')
    .addColumn('quarantined', 'integer', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('client_registrations').execute();
  await db.schema.dropTable('initial_access_tokens').execute();
}
