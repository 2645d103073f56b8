import type { Kysely, Selectable } from 'kysely';
import type { Database, PasskeysTable } from '../schema.js';
import { COLUMNS } from '../columns.js';

/**
 * Passkeys (WebAuthn credentials) of users. A credential id names exactly one passkey. An account-wide
 * passkey (`appId` null, added on the hosted account page) signs in everywhere and is a second factor;
 * one an app registered with its access token (`appId` set) signs in only at that app.
 */

export type PasskeyRow = Selectable<PasskeysTable>;

export interface Passkey {
  id: string;
  credentialId: string;
  userId: string;
  publicKey: string;
  counter: number;
  transports: string[];
  deviceType: 'singleDevice' | 'multiDevice';
  backedUp: boolean;
  name: string;
  /** The app that registered it (it signs in only there), or null: account-wide. */
  appId: string | null;
  createdAt: number;
  lastUsedAt: number | null;
}

function toPasskey(row: PasskeyRow): Passkey {
  let transports: string[] = [];
  try {
    const parsed: unknown = JSON.parse(row.transports);
    if (Array.isArray(parsed)) transports = parsed.filter((t): t is string => typeof t === 'string');
  } catch {
    // a malformed list only loses the transport hints
  }
  return {
    id: row.id,
    credentialId: row.credential_id,
    userId: row.user_id,
    publicKey: row.public_key,
    counter: row.counter,
    transports,
    deviceType: row.device_type,
    backedUp: row.backed_up === 1,
    name: row.name,
    appId: row.app_id,
    createdAt: row.created_at,
    lastUsedAt: row.last_used_at,
  };
}

export async function insertPasskey(db: Kysely<Database>, passkey: Omit<Passkey, 'lastUsedAt'>): Promise<void> {
  await db
    .insertInto('passkeys')
    .values({
      id: passkey.id,
      credential_id: passkey.credentialId,
      user_id: passkey.userId,
      public_key: passkey.publicKey,
      counter: passkey.counter,
      transports: JSON.stringify(passkey.transports),
      device_type: passkey.deviceType,
      backed_up: passkey.backedUp ? 1 : 0,
      name: passkey.name,
      app_id: passkey.appId,
      created_at: passkey.createdAt,
      last_used_at: null,
    })
    .execute();
}

export async function findPasskeyByCredentialId(db: Kysely<Database>, credentialId: string): Promise<Passkey | undefined> {
  const row = await db.selectFrom('passkeys').select(COLUMNS.passkeys).where('credential_id', '=', credentialId).executeTakeFirst();
  return row && toPasskey(row);
}

/** A user's passkeys, oldest first: all of them, or only the account-wide ones (the second factors). */
export async function listPasskeysOfUser(db: Kysely<Database>, userId: string, only?: 'account-wide'): Promise<Passkey[]> {
  let query = db.selectFrom('passkeys').select(COLUMNS.passkeys).where('user_id', '=', userId);
  if (only === 'account-wide') query = query.where('app_id', 'is', null);
  const rows = await query.orderBy('created_at', 'asc').orderBy('id', 'asc').execute();
  return rows.map(toPasskey);
}

/** Renames one of the user's passkeys; false when the user has no passkey of that id. */
export async function renamePasskey(db: Kysely<Database>, userId: string, id: string, name: string): Promise<boolean> {
  const result = await db.updateTable('passkeys').set({ name }).where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Deletes one of the user's passkeys; the deleted passkey, or undefined when the user has none of that id. */
export async function deletePasskey(db: Kysely<Database>, userId: string, id: string): Promise<Passkey | undefined> {
  const row = await db.selectFrom('passkeys').select(COLUMNS.passkeys).where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  if (!row) return undefined;
  const result = await db.deleteFrom('passkeys').where('id', '=', id).where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numDeletedRows) === 1 ? toPasskey(row) : undefined;
}

/**
 * Records a use: the new signature counter, the backup state the authenticator reports now, and the
 * time. Conditional on the counter still being the one the assertion was checked against, so of two
 * assertions checked at once against the same counter only one is accepted (false for the other).
 */
export async function recordPasskeyUse(
  db: Kysely<Database>,
  input: { id: string; expectedCounter: number; counter: number; deviceType: Passkey['deviceType']; backedUp: boolean; at: number },
): Promise<boolean> {
  const result = await db
    .updateTable('passkeys')
    .set({ counter: input.counter, device_type: input.deviceType, backed_up: input.backedUp ? 1 : 0, last_used_at: input.at })
    .where('id', '=', input.id)
    .where('counter', '=', input.expectedCounter)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
