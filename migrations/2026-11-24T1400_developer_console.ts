import { type Kysely, sql } from 'kysely';

// Frozen in time: never import application code here.
//
// Developer console (issue 15). A developer is linked to at most one user account (`user_id`), the one
// that signs in to the console; a user is linked to at most one developer. API keys move to their own
// table so a developer can hold several named keys and revoke each; every existing key is carried over
// as "Initial key" and keeps working. `developers.api_key_hash` stays (SQLite cannot drop a UNIQUE
// column without rebuilding the table) and keeps holding the hash of the key made with the developer.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('developers').addColumn('user_id', 'text', (c) => c.references('users.id').onDelete('set null')).execute();
  await db.schema.createIndex('developers_user_idx').on('developers').column('user_id').unique().execute();

  await db.schema
    .createTable('developer_api_keys')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('developer_id', 'text', (c) => c.notNull().references('developers.id').onDelete('cascade'))
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('key_hash', 'text', (c) => c.notNull().unique())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('revoked_at', 'bigint')
    .execute();
  await db.schema.createIndex('developer_api_keys_developer_idx').on('developer_api_keys').columns(['developer_id', 'created_at']).execute();
  await sql`INSERT INTO developer_api_keys (id, developer_id, name, key_hash, created_at, revoked_at)
            SELECT 'key_' || id, id, 'Initial key', api_key_hash, created_at, NULL FROM developers`.execute(db);
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('developer_api_keys').ifExists().execute();
  await db.schema.dropIndex('developers_user_idx').ifExists().execute();
  await db.schema.alterTable('developers').dropColumn('user_id').execute();
}
