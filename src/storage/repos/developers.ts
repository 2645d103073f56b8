import type { Kysely } from 'kysely';
import type { Database, DeveloperApiKeyRow, DeveloperRow } from '../schema.js';
import { inTransaction } from '../transaction.js';
import { COLUMNS, qualified } from '../columns.js';

/** A developer (owner of apps). API keys themselves are never stored, only their SHA-256. */
export interface Developer {
  id: string;
  email: string;
  name: string;
  createdAt: number;
}

/**
 * The platform's own developer: owner of the apps Gatehouse itself is a client of (the console). It
 * has no usable key and is left out of every listing, and of the "is there any developer" of the first start.
 */
export const PLATFORM_DEVELOPER_ID = 'dev_gatehouse_platform';

const toDeveloper = (row: DeveloperRow): Developer => ({ id: row.id, email: row.email, name: row.name, createdAt: row.created_at });

export type { DeveloperApiKeyRow };

/**
 * Inserts a developer and its first API key unless the email is taken; returns whether it was inserted
 * (race-safe on both dialects).
 */
export async function insertDeveloper(db: Kysely<Database>, developer: Developer, apiKeyHash: string, keyName = 'Initial key'): Promise<boolean> {
  return inTransaction(db, async (trx) => {
    const result = await trx
      .insertInto('developers')
      .values({ id: developer.id, email: developer.email, name: developer.name, api_key_hash: apiKeyHash, created_at: developer.createdAt })
      .onConflict((oc) => oc.doNothing())
      .executeTakeFirst();
    if (Number(result.numInsertedOrUpdatedRows ?? 0) !== 1) return false;
    await insertDeveloperApiKey(trx, { id: `key_${developer.id}`, developer_id: developer.id, name: keyName, key_hash: apiKeyHash, created_at: developer.createdAt, revoked_at: null });
    return true;
  });
}

/** The developer a live (unrevoked) API key belongs to. */
export async function findDeveloperByKeyHash(db: Kysely<Database>, apiKeyHash: string): Promise<Developer | undefined> {
  const row = await db
    .selectFrom('developer_api_keys as k')
    .innerJoin('developers as d', 'd.id', 'k.developer_id')
    .select(qualified('d', COLUMNS.developers))
    .where('k.key_hash', '=', apiKeyHash)
    .where('k.revoked_at', 'is', null)
    .where('d.id', '!=', PLATFORM_DEVELOPER_ID)
    .executeTakeFirst();
  return row && toDeveloper(row);
}

export async function findDeveloper(db: Kysely<Database>, id: string): Promise<Developer | undefined> {
  const row = await db.selectFrom('developers').select(COLUMNS.developers).where('id', '=', id).where('id', '!=', PLATFORM_DEVELOPER_ID).executeTakeFirst();
  return row && toDeveloper(row);
}

export async function findDeveloperByUser(db: Kysely<Database>, userId: string): Promise<Developer | undefined> {
  const row = await db.selectFrom('developers').select(COLUMNS.developers).where('user_id', '=', userId).where('id', '!=', PLATFORM_DEVELOPER_ID).executeTakeFirst();
  return row && toDeveloper(row);
}

/** A developer with this (normalised) email that no user account is linked to yet. */
export async function findUnlinkedDeveloperByEmail(db: Kysely<Database>, email: string): Promise<Developer | undefined> {
  const row = await db
    .selectFrom('developers')
    .select(COLUMNS.developers)
    .where('email', '=', email)
    .where('user_id', 'is', null)
    .where('id', '!=', PLATFORM_DEVELOPER_ID)
    .executeTakeFirst();
  return row && toDeveloper(row);
}

/** Links a developer to a user account, unlinking whichever developer the user had (one each way). */
export async function linkDeveloperToUser(db: Kysely<Database>, developerId: string, userId: string): Promise<void> {
  await inTransaction(db, async (trx) => {
    await trx.updateTable('developers').set({ user_id: null }).where('user_id', '=', userId).where('id', '!=', developerId).execute();
    await trx.updateTable('developers').set({ user_id: userId }).where('id', '=', developerId).execute();
  });
}

export async function listDevelopers(db: Kysely<Database>): Promise<Developer[]> {
  const rows = await db.selectFrom('developers').select(COLUMNS.developers).where('id', '!=', PLATFORM_DEVELOPER_ID).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
  return rows.map(toDeveloper);
}

export async function hasAnyDeveloper(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('developers').select('id').where('id', '!=', PLATFORM_DEVELOPER_ID).limit(1).executeTakeFirst()) !== undefined;
}

/** The platform developer, created once (concurrent starts: the first insert wins). */
export async function ensurePlatformDeveloper(db: Kysely<Database>, apiKeyHash: string, now: number): Promise<void> {
  await db
    .insertInto('developers')
    .values({ id: PLATFORM_DEVELOPER_ID, email: 'platform@gatehouse.invalid', name: 'Gatehouse platform', api_key_hash: apiKeyHash, created_at: now })
    .onConflict((oc) => oc.doNothing())
    .execute();
}

export async function insertDeveloperApiKey(db: Kysely<Database>, row: DeveloperApiKeyRow): Promise<void> {
  await db.insertInto('developer_api_keys').values(row).execute();
}

export async function listDeveloperApiKeys(db: Kysely<Database>, developerId: string): Promise<DeveloperApiKeyRow[]> {
  return db.selectFrom('developer_api_keys').select(COLUMNS.developer_api_keys).where('developer_id', '=', developerId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
}

/** Revokes one of the developer's live keys; returns whether it did. */
export async function revokeDeveloperApiKey(db: Kysely<Database>, developerId: string, keyId: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('developer_api_keys')
    .set({ revoked_at: now })
    .where('id', '=', keyId)
    .where('developer_id', '=', developerId)
    .where('revoked_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
