import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

/** The per-(app, user) profile cache. `data` is a JSON object serialised as text. */
export interface ProfileRecord {
  appId: string;
  userId: string;
  data: string;
  version: number;
  createdAt: number;
  updatedAt: number;
}

type Row = Database['profiles'];
export const toProfileRecord = (r: Row): ProfileRecord => ({
  appId: r.app_id,
  userId: r.user_id,
  data: r.data,
  version: Number(r.version),
  createdAt: Number(r.created_at),
  updatedAt: Number(r.updated_at),
});

/** Creates version 1 or replaces the document and bumps its version (no precondition). */
export async function upsertProfile(db: Kysely<Database>, input: { appId: string; userId: string; data: string; at: number }): Promise<ProfileRecord> {
  const row = await db
    .insertInto('profiles')
    .values({ app_id: input.appId, user_id: input.userId, data: input.data, version: 1, created_at: input.at, updated_at: input.at })
    .onConflict((oc) =>
      oc.columns(['app_id', 'user_id']).doUpdateSet((eb) => ({
        data: input.data,
        version: eb(eb.ref('profiles.version'), '+', 1),
        updated_at: input.at,
      })),
    )
    .returning(COLUMNS.profiles)
    .executeTakeFirstOrThrow();
  return toProfileRecord(row);
}

/**
 * Compare-and-set: replaces the document only if its current version is one of `versions` (or, with
 * `any`, if it exists at all). One conditional UPDATE, so concurrent writers cannot both win.
 * Returns undefined when the precondition failed.
 */
export async function replaceProfileIf(
  db: Kysely<Database>,
  input: { appId: string; userId: string; data: string; at: number; versions: number[] | 'any' },
): Promise<ProfileRecord | undefined> {
  if (input.versions !== 'any' && input.versions.length === 0) return undefined;
  let q = db
    .updateTable('profiles')
    .set((eb) => ({ data: input.data, version: eb(eb.ref('version'), '+', 1), updated_at: input.at }))
    .where('app_id', '=', input.appId)
    .where('user_id', '=', input.userId);
  if (input.versions !== 'any') q = q.where('version', 'in', input.versions);
  const row = await q.returning(COLUMNS.profiles).executeTakeFirst();
  return row && toProfileRecord(row);
}

/** Deletes the document (optionally only at one of `versions`); true when a row was deleted. */
export async function deleteProfile(db: Kysely<Database>, appId: string, userId: string, versions?: number[] | 'any'): Promise<boolean> {
  let q = db.deleteFrom('profiles').where('app_id', '=', appId).where('user_id', '=', userId);
  if (versions && versions !== 'any') {
    if (versions.length === 0) return false;
    q = q.where('version', 'in', versions);
  }
  const result = await q.executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}
