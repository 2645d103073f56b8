import { type Kysely, sql } from 'kysely';
import { isoTime } from '../../shared/time.js';
import { precompiled } from '../precompiled.js';
import type { Database, NewUser, UserRow } from '../schema.js';
import { COLUMNS, qualified } from '../columns.js';

export type { UserRow };

/** The public user: what sign-in results and listings may show. */
export interface PublicUser {
  id: string;
  email: string;
  email_verified: boolean;
  name: string | null;
  phone_number: string | null;
  birthdate: string | null;
  created_at: string;
}

export function toPublicUser(row: UserRow): PublicUser {
  return {
    id: row.id,
    email: row.email,
    email_verified: row.email_verified === 1,
    name: row.name,
    phone_number: row.phone_number,
    birthdate: row.birthdate,
    created_at: isoTime(row.created_at),
  };
}

/** Emails are trimmed and lowercased everywhere an address is stored or looked up. */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

const selectUserById = precompiled((db, id: string) => db.selectFrom('users').select(COLUMNS.users).where('id', '=', id));

export async function findUserById(db: Kysely<Database>, id: string): Promise<UserRow | undefined> {
  return (await selectUserById(db, id)).rows[0];
}

const selectUserByEmail = precompiled((db, email: string) => db.selectFrom('users').select(COLUMNS.users).where('email', '=', email));

export async function findUserByEmail(db: Kysely<Database>, email: string): Promise<UserRow | undefined> {
  return (await selectUserByEmail(db, normalizeEmail(email))).rows[0];
}

export async function insertUser(db: Kysely<Database>, user: NewUser): Promise<void> {
  await db.insertInto('users').values(user).execute();
}

export async function updateUser(
  db: Kysely<Database>,
  id: string,
  patch: Partial<Omit<UserRow, 'id' | 'created_at'>>,
): Promise<void> {
  await db.updateTable('users').set(patch).where('id', '=', id).execute();
}

/**
 * Replaces a password hash with its re-hash, only if it is still the one that was verified (a password
 * change in between wins). True when replaced.
 */
export async function replacePasswordHash(db: Kysely<Database>, id: string, verifiedHash: string, newHash: string, now: number): Promise<boolean> {
  const result = await db.updateTable('users').set({ password_hash: newHash, updated_at: now }).where('id', '=', id).where('password_hash', '=', verifiedHash).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** `%`, `_` and the escape character itself are literal in a substring search. */
const escapeLike = (text: string): string => text.replace(/[!%_]/g, (c) => `!${c}`);

export interface UserSearch {
  /** Case-insensitive substring of email or name. */
  q?: string;
  status?: UserRow['status'];
  limit: number;
  offset: number;
}

/** Users matching a search, newest first, with whether a provider account is bound, plus the total count. */
export async function searchUsers(db: Kysely<Database>, search: UserSearch): Promise<{ rows: Array<UserRow & { idp_bound: boolean }>; total: number }> {
  let q = db.selectFrom('users');
  if (search.status) q = q.where('users.status', '=', search.status);
  if (search.q) {
    const pattern = `%${escapeLike(search.q.toLowerCase())}%`;
    q = q.where(({ or }) =>
      or([sql<boolean>`lower(users.email) like ${pattern} escape '!'`, sql<boolean>`lower(users.name) like ${pattern} escape '!'`]),
    );
  }
  const [rows, count] = await Promise.all([
    q
      .select(qualified('users', COLUMNS.users))
      .select((eb) => eb.exists(eb.selectFrom('provider_identities').select('provider_identities.id').whereRef('provider_identities.user_id', '=', 'users.id')).as('idp_bound'))
      .orderBy('users.created_at', 'desc')
      .orderBy('users.id', 'desc')
      .limit(search.limit)
      .offset(search.offset)
      .execute(),
    q.select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow(),
  ]);
  return { rows: rows.map((row) => ({ ...row, idp_bound: Boolean(row.idp_bound) })), total: Number(count.n) };
}

export async function isIdpBound(db: Kysely<Database>, userId: string): Promise<boolean> {
  return (await db.selectFrom('provider_identities').select('id').where('user_id', '=', userId).limit(1).executeTakeFirst()) !== undefined;
}

/** The person's own language for hosted pages (the language switcher); null forgets it. */
export async function setUserLocale(db: Kysely<Database>, id: string, locale: string | null): Promise<void> {
  await db.updateTable('users').set({ locale }).where('id', '=', id).execute();
}
