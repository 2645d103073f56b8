import type { Kysely } from 'kysely';
import type { Database, DeveloperRow } from '../schema.js';

/** A developer (owner of apps). The API key itself is never stored, only its SHA-256. */
export interface Developer {
  id: string;
  email: string;
  name: string;
  createdAt: number;
}

const toDeveloper = (row: DeveloperRow): Developer => ({ id: row.id, email: row.email, name: row.name, createdAt: row.created_at });

/** Inserts a developer unless the email is taken; returns whether it was inserted (race-safe on both dialects). */
export async function insertDeveloper(db: Kysely<Database>, developer: Developer, apiKeyHash: string): Promise<boolean> {
  const result = await db
    .insertInto('developers')
    .values({ id: developer.id, email: developer.email, name: developer.name, api_key_hash: apiKeyHash, created_at: developer.createdAt })
    .onConflict((oc) => oc.column('email').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0) === 1;
}

export async function findDeveloperByKeyHash(db: Kysely<Database>, apiKeyHash: string): Promise<Developer | undefined> {
  const row = await db.selectFrom('developers').selectAll().where('api_key_hash', '=', apiKeyHash).executeTakeFirst();
  return row && toDeveloper(row);
}

export async function findDeveloper(db: Kysely<Database>, id: string): Promise<Developer | undefined> {
  const row = await db.selectFrom('developers').selectAll().where('id', '=', id).executeTakeFirst();
  return row && toDeveloper(row);
}

export async function listDevelopers(db: Kysely<Database>): Promise<Developer[]> {
  const rows = await db.selectFrom('developers').selectAll().orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
  return rows.map(toDeveloper);
}

export async function hasAnyDeveloper(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('developers').select('id').limit(1).executeTakeFirst()) !== undefined;
}
