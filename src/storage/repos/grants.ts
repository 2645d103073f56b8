import type { Insertable, Kysely } from 'kysely';
import type { AuthorizationCodesTable, Database, GrantRow, GrantsTable, RefreshTokenRow, RefreshTokensTable } from '../schema.js';

export type { GrantRow, RefreshTokenRow };

// Grants (`sid`) ------------------------------------------------------------------------------------

export async function insertGrant(db: Kysely<Database>, grant: Insertable<GrantsTable>): Promise<void> {
  await db.insertInto('grants').values(grant).execute();
}

export async function findGrant(db: Kysely<Database>, id: string): Promise<GrantRow | undefined> {
  return db.selectFrom('grants').selectAll().where('id', '=', id).executeTakeFirst();
}

/** True when the grant exists, is not revoked, its absolute lifetime has not passed and its user is active. */
export async function isGrantLive(db: Kysely<Database>, id: string, now: number): Promise<boolean> {
  const row = await db
    .selectFrom('grants')
    .innerJoin('users', 'users.id', 'grants.user_id')
    .select(['grants.id'])
    .where('grants.id', '=', id)
    .where('grants.revoked_at', 'is', null)
    .where('grants.expires_at', '>', now)
    .where('users.status', '=', 'active')
    .executeTakeFirst();
  return row !== undefined;
}

export async function revokeGrant(db: Kysely<Database>, id: string, at: number, reason: string): Promise<void> {
  await db.updateTable('grants').set({ revoked_at: at, revoked_reason: reason }).where('id', '=', id).where('revoked_at', 'is', null).execute();
}

/**
 * Revokes every grant of a user (optionally only for one app): all their refresh tokens and sessions
 * die, and so do the authorization codes not yet redeemed (they expire now), so a code issued just
 * before a password reset or a consent revocation never yields tokens.
 */
export async function revokeGrantsOfUser(db: Kysely<Database>, userId: string, at: number, reason: string, appId?: string): Promise<void> {
  let grants = db.updateTable('grants').set({ revoked_at: at, revoked_reason: reason }).where('user_id', '=', userId).where('revoked_at', 'is', null);
  let codes = db.updateTable('authorization_codes').set({ expires_at: at }).where('user_id', '=', userId).where('consumed_at', 'is', null).where('expires_at', '>', at);
  if (appId) {
    grants = grants.where('app_id', '=', appId);
    codes = codes.where('app_id', '=', appId);
  }
  await grants.execute();
  await codes.execute();
}

/** Ends the `pending` state of a REST sign-in's grant. Exactly one caller wins; returns whether it was this one. */
export async function finishPendingGrant(db: Kysely<Database>, id: string): Promise<boolean> {
  const result = await db.updateTable('grants').set({ awaiting_completion: 0 }).where('id', '=', id).where('awaiting_completion', '=', 1).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

// Refresh tokens -------------------------------------------------------------------------------------

export async function insertRefreshToken(db: Kysely<Database>, token: Insertable<RefreshTokensTable>): Promise<void> {
  await db.insertInto('refresh_tokens').values(token).execute();
}

export async function findRefreshToken(db: Kysely<Database>, tokenHash: string): Promise<RefreshTokenRow | undefined> {
  return db.selectFrom('refresh_tokens').selectAll().where('token_hash', '=', tokenHash).executeTakeFirst();
}

/** Marks a refresh token rotated. Exactly one caller wins; returns whether it was this one. */
export async function consumeRefreshToken(db: Kysely<Database>, tokenHash: string, at: number): Promise<boolean> {
  const result = await db
    .updateTable('refresh_tokens')
    .set({ consumed_at: at })
    .where('token_hash', '=', tokenHash)
    .where('consumed_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function recordRefreshSuccessor(db: Kysely<Database>, tokenHash: string, sealedResponse: string, successorHash: string): Promise<void> {
  await db.updateTable('refresh_tokens').set({ successor_response: sealedResponse, successor_hash: successorHash }).where('token_hash', '=', tokenHash).execute();
}

// Authorization codes --------------------------------------------------------------------------------

export type AuthorizationCodeRow = AuthorizationCodesTable;

export async function insertAuthorizationCode(db: Kysely<Database>, code: Insertable<AuthorizationCodesTable>): Promise<void> {
  await db.insertInto('authorization_codes').values(code).execute();
}

export async function findAuthorizationCode(db: Kysely<Database>, codeHash: string): Promise<AuthorizationCodeRow | undefined> {
  return db.selectFrom('authorization_codes').selectAll().where('code_hash', '=', codeHash).executeTakeFirst();
}

/** Single use: exactly one redemption (or burn) wins. */
export async function consumeAuthorizationCode(db: Kysely<Database>, codeHash: string, at: number): Promise<boolean> {
  const result = await db
    .updateTable('authorization_codes')
    .set({ consumed_at: at })
    .where('code_hash', '=', codeHash)
    .where('consumed_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

export async function setAuthorizationCodeGrant(db: Kysely<Database>, codeHash: string, grantId: string): Promise<void> {
  await db.updateTable('authorization_codes').set({ grant_id: grantId }).where('code_hash', '=', codeHash).execute();
}
