import type { Kysely } from 'kysely';
import type { Database, NewUser, UserRow } from '../schema.js';
import { COLUMNS, qualified } from '../columns.js';

/** Bulk user import and export (docs/guides/migrating-users.md): set-at-a-time reads and writes. */

export interface ExistingUser {
  user: UserRow;
  /** Set when the user came from an import: its external id (null when the row gave none). */
  imported: { externalId: string | null } | null;
}

/** The users with these (normalised) emails, with their import record, by email. */
export async function findUsersForImport(db: Kysely<Database>, emails: readonly string[]): Promise<Map<string, ExistingUser>> {
  const out = new Map<string, ExistingUser>();
  if (!emails.length) return out;
  const rows = await db
    .selectFrom('users')
    .leftJoin('imported_users', 'imported_users.user_id', 'users.id')
    .select(qualified('users', COLUMNS.users))
    .select(['imported_users.user_id as imported_user_id', 'imported_users.external_id'])
    .where('users.email', 'in', emails)
    .execute();
  for (const { imported_user_id, external_id, ...user } of rows) {
    out.set(user.email, { user, imported: imported_user_id ? { externalId: external_id } : null });
  }
  return out;
}

/** Which user each of these external ids belongs to. */
export async function findExternalIds(db: Kysely<Database>, externalIds: readonly string[]): Promise<Map<string, string>> {
  if (!externalIds.length) return new Map();
  const rows = await db.selectFrom('imported_users').select(['external_id', 'user_id']).where('external_id', 'in', externalIds).execute();
  return new Map(rows.map((r) => [r.external_id!, r.user_id]));
}

export interface ImportedUserRows {
  user: NewUser;
  externalId: string | null;
  apps: Array<{ appId: string; consentScope: string | null }>;
  totpSecretSealed: string | null;
}

/** Rows per multi-row INSERT: well under SQLite's 32,766 bound variables and PostgreSQL's 65,535. */
const INSERT_CHUNK = 500;

async function insertChunked<T>(rows: T[], insert: (chunk: T[]) => Promise<unknown>): Promise<void> {
  for (let i = 0; i < rows.length; i += INSERT_CHUNK) await insert(rows.slice(i, i + INSERT_CHUNK));
}

/** Inserts users with their import records, app memberships, consents and authenticator apps (call inside a transaction). */
export async function insertImportedUsers(db: Kysely<Database>, rows: readonly ImportedUserRows[], at: number): Promise<void> {
  await insertChunked([...rows], (chunk) => db.insertInto('users').values(chunk.map((r) => r.user)).execute());
  await insertChunked([...rows], (chunk) =>
    db.insertInto('imported_users').values(chunk.map((r) => ({ user_id: r.user.id, external_id: r.externalId, imported_at: at }))).execute(),
  );
  const members = rows.flatMap((r) => r.apps.map((a) => ({ app_id: a.appId, user_id: r.user.id, status: 'active' as const, created_at: at, last_login_at: null })));
  await insertChunked(members, (chunk) => db.insertInto('app_users').values(chunk).execute());
  const consents = rows.flatMap((r) => r.apps.flatMap((a) => (a.consentScope ? [{ app_id: a.appId, user_id: r.user.id, scope: a.consentScope, created_at: at, updated_at: at }] : [])));
  await insertChunked(consents, (chunk) => db.insertInto('consents').values(chunk).execute());
  const factors = rows.flatMap((r) => (r.totpSecretSealed ? [{ user_id: r.user.id, secret_sealed: r.totpSecretSealed, confirmed_at: at, last_step: null, created_at: at }] : []));
  await insertChunked(factors, (chunk) => db.insertInto('totp_factors').values(chunk).execute());
}

export interface ExportedUserRow {
  user: UserRow;
  externalId: string | null;
  totpSecretSealed: string | null;
  appIds: string[];
}

/**
 * One page of users for an export, in id order after `afterId` (keyset: a page costs the same at the
 * end of a million users as at the start); only members of `appId` when given.
 */
export async function exportPage(db: Kysely<Database>, options: { appId?: string; afterId: string; limit: number; withApps: boolean }): Promise<ExportedUserRow[]> {
  let q = db
    .selectFrom('users')
    .leftJoin('imported_users', 'imported_users.user_id', 'users.id')
    .leftJoin('totp_factors', (join) => join.onRef('totp_factors.user_id', '=', 'users.id').on('totp_factors.confirmed_at', 'is not', null))
    .select(qualified('users', COLUMNS.users))
    .select(['imported_users.external_id', 'totp_factors.secret_sealed'])
    .where('users.id', '>', options.afterId)
    .orderBy('users.id')
    .limit(options.limit);
  if (options.appId) {
    const appId = options.appId;
    q = q.where(({ exists, selectFrom }) => exists(selectFrom('app_users').select('app_users.user_id').whereRef('app_users.user_id', '=', 'users.id').where('app_users.app_id', '=', appId)));
  }
  const rows = await q.execute();
  const apps = new Map<string, string[]>();
  if (options.withApps && rows.length) {
    const members = await db.selectFrom('app_users').select(['user_id', 'app_id']).where('user_id', 'in', rows.map((r) => r.id)).orderBy('app_id').execute();
    for (const m of members) apps.set(m.user_id, [...(apps.get(m.user_id) ?? []), m.app_id]);
  }
  return rows.map(({ external_id, secret_sealed, ...user }) => ({ user, externalId: external_id, totpSecretSealed: secret_sealed, appIds: apps.get(user.id) ?? [] }));
}
