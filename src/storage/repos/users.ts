import type { Kysely } from 'kysely';
import { isoTime } from '../../shared/time.js';
import type { Database, NewUser, UserRow } from '../schema.js';

export type { UserRow };

/** The public user of CONTRACT §5: what sign-in results and listings may show. */
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

/** Emails are trimmed and lowercased everywhere an address is stored or looked up (CONTRACT §5). */
export const normalizeEmail = (email: string): string => email.trim().toLowerCase();

export async function findUserById(db: Kysely<Database>, id: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('id', '=', id).executeTakeFirst();
}

export async function findUserByEmail(db: Kysely<Database>, email: string): Promise<UserRow | undefined> {
  return db.selectFrom('users').selectAll().where('email', '=', normalizeEmail(email)).executeTakeFirst();
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
