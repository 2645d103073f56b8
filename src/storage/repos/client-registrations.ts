import type { ExpressionBuilder, Kysely } from 'kysely';
import { COLUMNS } from '../columns.js';
import type { ClientRegistrationsTable, Database, InitialAccessTokensTable } from '../schema.js';

/**
 * Dynamic client registration (RFC 7591/7592, docs/reference/oauth.md#dynamic-client-registration-rfc-7591):
 * initial access tokens and registration access tokens, both stored only as SHA-256 hashes.
 */

export type InitialAccessTokenRow = InitialAccessTokensTable;
export type ClientRegistrationRow = ClientRegistrationsTable;

/** A token that can still register a client: not revoked, not expired, and not a used single-use one. */
const live = (now: number) => (eb: ExpressionBuilder<Database, 'initial_access_tokens'>) =>
  eb.and([eb('revoked_at', 'is', null), eb('expires_at', '>', now), eb.or([eb('single_use', '=', 0), eb('used_at', 'is', null)])]);

export async function insertInitialAccessToken(db: Kysely<Database>, row: InitialAccessTokenRow): Promise<void> {
  await db.insertInto('initial_access_tokens').values(row).execute();
}

export async function listInitialAccessTokens(db: Kysely<Database>, developerId: string): Promise<InitialAccessTokenRow[]> {
  return db.selectFrom('initial_access_tokens').select(COLUMNS.initial_access_tokens).where('developer_id', '=', developerId).orderBy('created_at', 'desc').orderBy('id', 'desc').execute();
}

/** Tokens of a developer that can still register a client. */
export async function countLiveInitialAccessTokens(db: Kysely<Database>, developerId: string, now: number): Promise<number> {
  const row = await db
    .selectFrom('initial_access_tokens')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('developer_id', '=', developerId)
    .where(live(now))
    .executeTakeFirstOrThrow();
  return Number(row.n);
}

export async function revokeInitialAccessToken(db: Kysely<Database>, developerId: string, id: string, now: number): Promise<boolean> {
  const result = await db.updateTable('initial_access_tokens').set({ revoked_at: now }).where('id', '=', id).where('developer_id', '=', developerId).where('revoked_at', 'is', null).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The live token with this hash, read only (the check before the metadata is validated). */
export async function findLiveInitialAccessToken(db: Kysely<Database>, tokenHash: string, now: number): Promise<InitialAccessTokenRow | undefined> {
  return db
    .selectFrom('initial_access_tokens')
    .select(COLUMNS.initial_access_tokens)
    .where('token_hash', '=', tokenHash)
    .where(live(now))
    .executeTakeFirst();
}

/**
 * Marks a use of the token by a conditional UPDATE (a single-use token only while unused: two
 * concurrent registrations cannot both take it); false when it is no longer live.
 */
export async function useInitialAccessToken(db: Kysely<Database>, id: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('initial_access_tokens')
    .set({ used_at: now })
    .where('id', '=', id)
    .where(live(now))
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function insertClientRegistration(db: Kysely<Database>, row: ClientRegistrationRow): Promise<void> {
  await db.insertInto('client_registrations').values(row).execute();
}

export async function findClientRegistration(db: Kysely<Database>, appId: string): Promise<ClientRegistrationRow | undefined> {
  return db.selectFrom('client_registrations').select(COLUMNS.client_registrations).where('app_id', '=', appId).executeTakeFirst();
}

/** Lifts the quarantine; true when the app was quarantined. */
export async function releaseClientRegistration(db: Kysely<Database>, appId: string): Promise<boolean> {
  const result = await db.updateTable('client_registrations').set({ quarantined: 0 }).where('app_id', '=', appId).where('quarantined', '=', 1).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function listQuarantinedRegistrations(db: Kysely<Database>): Promise<ClientRegistrationRow[]> {
  return db.selectFrom('client_registrations').select(COLUMNS.client_registrations).where('quarantined', '=', 1).orderBy('created_at', 'asc').orderBy('app_id', 'asc').limit(1000).execute();
}
