import { type Kysely, sql } from 'kysely';

// Frozen in time: never import application code here.
//
// At most one active signing key per algorithm: instances started at once on an empty
// database each used to create their own. Keys already duplicated that way are settled first: the
// oldest active key (the one every instance signs with) stays, the others are retired now and stay
// published for their retention, so tokens they signed still verify.
//
// data: duplicate active keys are retired (never deleted) before the unique index can exist; a running
// version signs with the oldest active key, which stays, and keeps verifying with the retired ones.

export async function up(db: Kysely<any>): Promise<void> {
  const now = Math.floor(Date.now() / 1000);
  await sql`
    update signing_keys set retired_at = ${now}
    where retired_at is null and exists (
      select 1 from signing_keys as older
      where older.alg = signing_keys.alg and older.retired_at is null
        and (older.created_at < signing_keys.created_at or (older.created_at = signing_keys.created_at and older.kid < signing_keys.kid))
    )`.execute(db);
  await db.schema.createIndex('signing_keys_one_active_idx').unique().on('signing_keys').column('alg').where(sql.ref('retired_at'), 'is', null).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropIndex('signing_keys_one_active_idx').ifExists().execute();
}
