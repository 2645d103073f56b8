import type { Insertable, Kysely } from 'kysely';
import type { BrowserSessionRow, BrowserSessionsTable, Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

export type { BrowserSessionRow };

export async function insertBrowserSession(db: Kysely<Database>, row: Insertable<BrowserSessionsTable>): Promise<void> {
  await db.insertInto('browser_sessions').values(row).execute();
}

/** A session by the hash of its cookie value, in whatever state. */
export async function findBrowserSession(db: Kysely<Database>, idHash: string): Promise<BrowserSessionRow | undefined> {
  return db.selectFrom('browser_sessions').select(COLUMNS.browser_sessions).where('id_hash', '=', idHash).executeTakeFirst();
}

export async function touchBrowserSession(db: Kysely<Database>, idHash: string, now: number, expiresAt: number): Promise<void> {
  await db.updateTable('browser_sessions').set({ last_seen_at: now, expires_at: expiresAt }).where('id_hash', '=', idHash).execute();
}

export async function setBrowserSessionData(db: Kysely<Database>, idHash: string, data: string): Promise<void> {
  await db.updateTable('browser_sessions').set({ data }).where('id_hash', '=', idHash).execute();
}

export async function revokeBrowserSession(db: Kysely<Database>, idHash: string, at: number): Promise<void> {
  await db.updateTable('browser_sessions').set({ revoked_at: at }).where('id_hash', '=', idHash).where('revoked_at', 'is', null).execute();
}

/** Ends every browser session of a user (password reset, disabling), optionally keeping one. */
export async function revokeBrowserSessionsOfUser(db: Kysely<Database>, userId: string, at: number, exceptIdHash?: string): Promise<void> {
  let q = db.updateTable('browser_sessions').set({ revoked_at: at }).where('user_id', '=', userId).where('revoked_at', 'is', null);
  if (exceptIdHash) q = q.where('id_hash', '!=', exceptIdHash);
  await q.execute();
}

export async function listBrowserSessionsOfUser(db: Kysely<Database>, userId: string, now: number): Promise<BrowserSessionRow[]> {
  return db
    .selectFrom('browser_sessions')
    .select(COLUMNS.browser_sessions)
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .orderBy('created_at', 'desc')
    .execute();
}
