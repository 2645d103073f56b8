import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Bulk user import (docs/guides/migrating-users.md). Additive: a new table the running version never reads.
// - `imported_users`: one row per user created by an import, with the id the user had in the system they
//   came from (`external_id`, unique when given), so importing the same file again finds them by it.
//   Deleted with the user (cascade), like every other per-user row.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('imported_users')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('external_id', 'text')
    .addColumn('imported_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('imported_users_external_id_idx').unique().on('imported_users').column('external_id').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('imported_users').execute();
}
