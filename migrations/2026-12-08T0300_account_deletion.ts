import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Account deletion with a grace period (docs/account/deletion.md). Additive:
// - `users.deletion_scheduled_at`: the instant (epoch seconds) the account is purged; NULL = no
//   deletion scheduled. A nullable column the running version never reads.
// - an index on it, for the maintenance loop's "which accounts are due" range read;
// - an index on `events.user_id`: the purge scrubs a person's events (and the data export reads them)
//   by user. On a large PostgreSQL events table create it CONCURRENTLY before the release
//   (docs/operations/migrations.md); `ifNotExists` then finds it and does nothing.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users').addColumn('deletion_scheduled_at', 'bigint').execute();
  await db.schema.createIndex('users_deletion_due_idx').ifNotExists().on('users').column('deletion_scheduled_at').execute();
  await db.schema.createIndex('events_user_idx').ifNotExists().on('events').columns(['user_id', 'id']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('events_user_idx').ifExists().execute();
  await db.schema.dropIndex('users_deletion_due_idx').ifExists().execute();
  await db.schema.alterTable('users').dropColumn('deletion_scheduled_at').execute();
}
