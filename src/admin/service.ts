import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import { hashSecret, newId, newSecret } from '../shared/ids.js';
import { isoTime } from '../shared/time.js';
import { revokeBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { appendEvent } from '../storage/repos/events.js';
import { type Developer, insertDeveloper, listDevelopers } from '../storage/repos/developers.js';
import { revokeGrantsOfUser } from '../storage/repos/grants.js';
import { findUserById, isIdpBound, normalizeEmail, searchUsers, toPublicUser, type PublicUser, updateUser, type UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import type { CreateDeveloperInput, UserListInput } from './schemas.js';

export interface DeveloperView {
  id: string;
  email: string;
  name: string;
  created_at: string;
}

const toDeveloperView = (d: Developer): DeveloperView => ({ id: d.id, email: d.email, name: d.name, created_at: isoTime(d.createdAt) });

/** Creates a developer and its API key, shown once (only the SHA-256 is stored). 409 `conflict` if the email is taken. */
export async function createDeveloper(db: Kysely<Database>, now: number, input: CreateDeveloperInput): Promise<DeveloperView & { api_key: string }> {
  const email = normalizeEmail(input.email);
  const developer: Developer = { id: newId('dev'), email, name: input.name ?? email, createdAt: now };
  const apiKey = newSecret('dk');
  if (!(await insertDeveloper(db, developer, hashSecret(apiKey)))) {
    throw new AppError('conflict', { message: 'A developer with this email already exists.' });
  }
  return { ...toDeveloperView(developer), api_key: apiKey };
}

export async function listDeveloperViews(db: Kysely<Database>): Promise<DeveloperView[]> {
  return (await listDevelopers(db)).map(toDeveloperView);
}

export type AdminUserView = PublicUser & { status: UserRow['status']; idp_bound: boolean; deletion_scheduled_at: string | null };

const toAdminUserView = (row: UserRow, idpBound: boolean): AdminUserView => ({
  ...toPublicUser(row),
  status: row.status,
  idp_bound: idpBound,
  deletion_scheduled_at: row.deletion_scheduled_at === null ? null : isoTime(row.deletion_scheduled_at),
});

/** One user as the admin sees it; 404 `not_found` when there is none. */
export async function adminUserView(db: Kysely<Database>, userId: string): Promise<AdminUserView> {
  const user = await findUserById(db, userId);
  if (!user) throw new AppError('not_found', { detail: `user ${userId}` });
  return toAdminUserView(user, await isIdpBound(db, userId));
}

export async function listUsers(db: Kysely<Database>, query: UserListInput) {
  const { rows, total } = await searchUsers(db, {
    q: query.q || undefined,
    status: query.status,
    limit: query.pageSize,
    offset: (query.page - 1) * query.pageSize,
  });
  return { items: rows.map((row) => toAdminUserView(row, row.idp_bound)), page: query.page, pageSize: query.pageSize, total };
}

/**
 * Enables or disables a user. Disabling revokes, in the same transaction, every grant (so all refresh
 * tokens, session JWTs and access tokens checked against their grant) and every browser session.
 */
export async function setUserStatus(db: Kysely<Database>, now: number, userId: string, status: UserRow['status']): Promise<AdminUserView> {
  const user = await db.transaction().execute(async (trx) => {
    const current = await findUserById(trx, userId);
    if (!current) throw new AppError('not_found', { detail: `user ${userId}` });
    await updateUser(trx, userId, { status, updated_at: now });
    if (status === 'disabled') {
      await revokeGrantsOfUser(trx, userId, now, 'user_disabled');
      await revokeBrowserSessionsOfUser(trx, userId, now);
    }
    // A change of status is recorded (and becomes the user.disabled / user.enabled webhook, docs/webhooks.md).
    if (current.status !== status) await appendEvent(trx, now, { type: status === 'disabled' ? 'user.disabled' : 'user.enabled', userId, data: { by: 'admin' } });
    return { ...current, status, updated_at: now };
  });
  return toAdminUserView(user, await isIdpBound(db, userId));
}
