import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Indexes for the purge of expired rows (src/maintenance): each purge rule is a range over one of
// these columns, so a batch reads only the rows it deletes instead of scanning the table. Columns that
// are null for most live rows (revoked_at, consumed_at) get partial indexes of the non-null rows
// (both dialects use them for `column < x`, which implies `column IS NOT NULL`).

const INDEXES: Array<{ name: string; table: string; column: string; partial?: boolean }> = [
  { name: 'authorization_codes_expires_idx', table: 'authorization_codes', column: 'expires_at' },
  { name: 'refresh_tokens_expires_idx', table: 'refresh_tokens', column: 'expires_at' },
  { name: 'grants_expires_idx', table: 'grants', column: 'expires_at' },
  { name: 'grants_revoked_idx', table: 'grants', column: 'revoked_at', partial: true },
  { name: 'one_time_tokens_expires_idx', table: 'one_time_tokens', column: 'expires_at' },
  { name: 'one_time_tokens_consumed_idx', table: 'one_time_tokens', column: 'consumed_at', partial: true },
  { name: 'browser_sessions_expires_idx', table: 'browser_sessions', column: 'expires_at' },
  { name: 'browser_sessions_revoked_idx', table: 'browser_sessions', column: 'revoked_at', partial: true },
  { name: 'throttle_counters_updated_idx', table: 'throttle_counters', column: 'updated_at' },
  { name: 'events_at_idx', table: 'events', column: 'at' },
];

export async function up(db: Kysely<any>): Promise<void> {
  for (const index of INDEXES) {
    let q = db.schema.createIndex(index.name).ifNotExists().on(index.table).column(index.column);
    if (index.partial) q = q.where(index.column, 'is not', null);
    await q.execute();
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const index of [...INDEXES].reverse()) await db.schema.dropIndex(index.name).ifExists().execute();
}
