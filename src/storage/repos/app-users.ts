import type { Kysely } from 'kysely';
import { precompiled } from '../precompiled.js';
import type { Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

export interface AppUser {
  appId: string;
  userId: string;
  status: 'active' | 'blocked';
  createdAt: number;
  lastLoginAt: number | null;
}

export async function findAppUser(db: Kysely<Database>, appId: string, userId: string): Promise<AppUser | undefined> {
  const row = await db.selectFrom('app_users').select(COLUMNS.app_users).where('app_id', '=', appId).where('user_id', '=', userId).executeTakeFirst();
  return row && { appId: row.app_id, userId: row.user_id, status: row.status, createdAt: row.created_at, lastLoginAt: row.last_login_at };
}

const stampAppSignIn = precompiled((db, appId: string, userId: string, at: number) =>
  db.updateTable('app_users').set({ last_login_at: at }).where('app_id', '=', appId).where('user_id', '=', userId),
);

const upsertAppSignIn = precompiled((db, appId: string, userId: string, at: number) =>
  db
    .insertInto('app_users')
    .values({ app_id: appId, user_id: userId, status: 'active', created_at: at, last_login_at: at })
    .onConflict((oc) => oc.columns(['app_id', 'user_id']).doUpdateSet({ last_login_at: at })),
);

/**
 * A completed sign-in makes the user a user of the app and stamps last_login_at.
 * A returning user's row is only stamped: on PostgreSQL an upsert fires the BEFORE INSERT fill trigger
 * (its users lookup) before it finds the conflict, a third of a login's executor time. The upsert
 * covers a first sign-in, and one racing another for the same new row.
 */
export async function recordAppSignIn(db: Kysely<Database>, appId: string, userId: string, at: number): Promise<void> {
  if ((await stampAppSignIn(db, appId, userId, at)).numAffectedRows === 1n) return;
  await upsertAppSignIn(db, appId, userId, at);
}

export async function setAppUserStatus(db: Kysely<Database>, appId: string, userId: string, status: 'active' | 'blocked'): Promise<boolean> {
  const result = await db.updateTable('app_users').set({ status }).where('app_id', '=', appId).where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Apps a user has signed in to (account page: connected apps). */
export async function listAppsOfUser(db: Kysely<Database>, userId: string): Promise<Array<{ appId: string; appName: string; lastLoginAt: number | null }>> {
  const rows = await db
    .selectFrom('app_users')
    .innerJoin('apps', 'apps.id', 'app_users.app_id')
    .select(['app_users.app_id', 'apps.name', 'app_users.last_login_at'])
    .where('app_users.user_id', '=', userId)
    .orderBy('app_users.last_login_at', 'desc')
    .execute();
  return rows.map((r) => ({ appId: r.app_id, appName: r.name, lastLoginAt: r.last_login_at }));
}

/** The email addresses of those of `userIds` who are users of the app (the others are left out). */
export async function findMemberEmails(db: Kysely<Database>, appId: string, userIds: readonly string[]): Promise<Map<string, string>> {
  if (!userIds.length) return new Map();
  const rows = await db.selectFrom('app_users').select(['user_id', 'email']).where('app_id', '=', appId).where('user_id', 'in', [...new Set(userIds)]).execute();
  return new Map(rows.map((row) => [row.user_id, row.email]));
}
