import type { Kysely } from 'kysely';
import { COLUMNS } from '../columns.js';
import type { Database, DeviceAuthorizationsTable } from '../schema.js';

/**
 * Device authorization requests (RFC 8628, docs/reference/oauth.md#device-authorization-grant-rfc-8628): stored by
 * the SHA-256 of the device code, found by the SHA-256 of the normalised user code. Every change of state
 * is a conditional UPDATE on the state it leaves, so two requests racing decide once.
 */

export type DeviceAuthorizationRow = DeviceAuthorizationsTable;

export async function insertDeviceAuthorization(
  db: Kysely<Database>,
  row: { deviceCodeHash: string; userCodeHash: string; appId: string; scope: string; now: number; expiresAt: number; interval: number },
): Promise<void> {
  await db
    .insertInto('device_authorizations')
    .values({
      device_code_hash: row.deviceCodeHash,
      user_code_hash: row.userCodeHash,
      app_id: row.appId,
      scope: row.scope,
      status: 'pending',
      created_at: row.now,
      expires_at: row.expiresAt,
      poll_interval: row.interval,
      polled_at: null,
      user_id: null,
      auth_time: null,
      amr: null,
      decided_at: null,
    })
    .execute();
}

/** The request a person's user code names while it still waits for them (pending, not expired). */
export async function findPendingByUserCode(db: Kysely<Database>, userCodeHash: string, now: number): Promise<DeviceAuthorizationRow | undefined> {
  return db
    .selectFrom('device_authorizations')
    .select(COLUMNS.device_authorizations)
    .where('user_code_hash', '=', userCodeHash)
    .where('status', '=', 'pending')
    .where('expires_at', '>', now)
    .executeTakeFirst();
}

export async function findByDeviceCode(db: Kysely<Database>, deviceCodeHash: string): Promise<DeviceAuthorizationRow | undefined> {
  return db.selectFrom('device_authorizations').select(COLUMNS.device_authorizations).where('device_code_hash', '=', deviceCodeHash).executeTakeFirst();
}

/**
 * Records a poll when the last one is at least `interval` seconds old (RFC 8628 §3.5); otherwise adds 5 s
 * to the interval and records nothing else. Returns whether the poll came in time.
 */
export async function recordPoll(db: Kysely<Database>, deviceCodeHash: string, now: number): Promise<boolean> {
  const inTime = await db
    .updateTable('device_authorizations')
    .set({ polled_at: now })
    .where('device_code_hash', '=', deviceCodeHash)
    .where((eb) => eb.or([eb('polled_at', 'is', null), eb(eb('polled_at', '+', eb.ref('poll_interval')), '<=', now)]))
    .executeTakeFirst();
  if (Number(inTime.numUpdatedRows) === 1) return true;
  await db
    .updateTable('device_authorizations')
    .set((eb) => ({ poll_interval: eb('poll_interval', '+', 5), polled_at: now }))
    .where('device_code_hash', '=', deviceCodeHash)
    .execute();
  return false;
}

/** The person's decision on a pending, unexpired request; false when it was already decided or has expired. */
export async function decideDeviceAuthorization(
  db: Kysely<Database>,
  deviceCodeHash: string,
  decision: { status: 'approved' | 'denied'; userId: string; authTime: number | null; amr: string | null; now: number },
): Promise<boolean> {
  const result = await db
    .updateTable('device_authorizations')
    .set({ status: decision.status, user_id: decision.userId, auth_time: decision.authTime, amr: decision.amr, decided_at: decision.now })
    .where('device_code_hash', '=', deviceCodeHash)
    .where('status', '=', 'pending')
    .where('expires_at', '>', decision.now)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Marks an approved request redeemed, once: true only for the one redemption that wins. */
export async function redeemDeviceAuthorization(db: Kysely<Database>, deviceCodeHash: string): Promise<boolean> {
  const result = await db
    .updateTable('device_authorizations')
    .set({ status: 'redeemed' })
    .where('device_code_hash', '=', deviceCodeHash)
    .where('status', '=', 'approved')
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}
