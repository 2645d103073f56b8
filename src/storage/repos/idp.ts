import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';
import { COLUMNS } from '../columns.js';

/**
 * Storage of the external-provider feature: provider identities bound to users (keyed by the
 * provider's (issuer, subject), never by email) and the feature's single-use rows in
 * `one_time_tokens` (kinds `idp_state`, `idp_continue`, `idp_bind`, `idp_id_token`).
 */

export interface ProviderIdentity {
  id: string;
  userId: string;
  issuer: string;
  subject: string;
  email: string | null;
  createdAt: number;
}

type IdentityRow = Database['provider_identities'];

const toIdentity = (r: IdentityRow): ProviderIdentity => ({
  id: r.id,
  userId: r.user_id,
  issuer: r.issuer,
  subject: r.subject,
  email: r.email,
  createdAt: r.created_at,
});

export async function findIdentity(db: Kysely<Database>, issuer: string, subject: string): Promise<ProviderIdentity | undefined> {
  const row = await db.selectFrom('provider_identities').select(COLUMNS.provider_identities).where('issuer', '=', issuer).where('subject', '=', subject).executeTakeFirst();
  return row && toIdentity(row);
}

export async function listIdentitiesOfUser(db: Kysely<Database>, userId: string): Promise<ProviderIdentity[]> {
  const rows = await db.selectFrom('provider_identities').select(COLUMNS.provider_identities).where('user_id', '=', userId).orderBy('created_at', 'asc').execute();
  return rows.map(toIdentity);
}

export async function insertIdentity(db: Kysely<Database>, identity: ProviderIdentity): Promise<void> {
  await db
    .insertInto('provider_identities')
    .values({
      id: identity.id,
      user_id: identity.userId,
      issuer: identity.issuer,
      subject: identity.subject,
      email: identity.email,
      created_at: identity.createdAt,
    })
    .execute();
}

/** Removes the user's binding to `issuer`; returns the removed identity. */
export async function deleteIdentityOfUser(db: Kysely<Database>, userId: string, issuer: string): Promise<ProviderIdentity | undefined> {
  const row = await db.selectFrom('provider_identities').select(COLUMNS.provider_identities).where('user_id', '=', userId).where('issuer', '=', issuer).executeTakeFirst();
  if (!row) return undefined;
  await db.deleteFrom('provider_identities').where('id', '=', row.id).execute();
  return toIdentity(row);
}

// Single-use rows -------------------------------------------------------------------------------------

export type IdpTokenKind = 'idp_state' | 'idp_continue' | 'idp_bind' | 'idp_id_token';

export interface NewIdpToken {
  id: string;
  kind: IdpTokenKind;
  tokenHash: string;
  userId?: string | null;
  appId?: string | null;
  data: object;
  createdAt: number;
  expiresAt: number;
}

const idpTokenValues = (t: NewIdpToken) => ({
  id: t.id,
  kind: t.kind,
  token_hash: t.tokenHash,
  code_hash: null,
  user_id: t.userId ?? null,
  email: null,
  app_id: t.appId ?? null,
  data: JSON.stringify(t.data),
  attempts: 0,
  created_at: t.createdAt,
  expires_at: t.expiresAt,
  consumed_at: null,
});

export async function insertIdpToken(db: Kysely<Database>, t: NewIdpToken): Promise<void> {
  await db.insertInto('one_time_tokens').values(idpTokenValues(t)).execute();
}

/** Voids every live row of `kind` for (user, app): a fresh `/continue` ticket kills the earlier ones. */
export async function voidIdpTokens(db: Kysely<Database>, kind: IdpTokenKind, userId: string, appId: string, now: number): Promise<void> {
  await db
    .updateTable('one_time_tokens')
    .set({ consumed_at: now })
    .where('kind', '=', kind)
    .where('user_id', '=', userId)
    .where('app_id', '=', appId)
    .where('consumed_at', 'is', null)
    .execute();
}

/**
 * Remembers an accepted id_token (by hash) until it expires. Returns false when it was already
 * remembered (the token is being replayed); a concurrent insert of the same token loses the unique key
 * and also answers false, while any other database failure propagates.
 */
export async function rememberIdToken(db: Kysely<Database>, input: { id: string; tokenHash: string; issuer: string; now: number; expiresAt: number }): Promise<boolean> {
  const result = await db
    .insertInto('one_time_tokens')
    .values(idpTokenValues({ id: input.id, kind: 'idp_id_token', tokenHash: input.tokenHash, data: { issuer: input.issuer }, createdAt: input.now, expiresAt: input.expiresAt }))
    .onConflict((oc) => oc.column('token_hash').doNothing())
    .executeTakeFirst();
  return Number(result.numInsertedOrUpdatedRows ?? 0n) === 1;
}

/**
 * Compare-and-set of a live single-use row's data (e.g. a bind ticket claimed by the first browser
 * that opens it): true only for the one caller that saw `expected`.
 */
export async function replaceIdpTokenData(db: Kysely<Database>, id: string, expected: string, next: object, now: number): Promise<boolean> {
  const result = await db
    .updateTable('one_time_tokens')
    .set({ data: JSON.stringify(next) })
    .where('id', '=', id)
    .where('data', '=', expected)
    .where('consumed_at', 'is', null)
    .where('expires_at', '>', now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

