import type { Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import type { Database, LogoutDeliveryRow } from '../schema.js';
import { claimDelivery, listDueDeliveries } from './delivery-queues.js';

export type { LogoutDeliveryRow };

/**
 * The back-channel logout outbox (docs/guides/back-channel-logout.md): one row per logout token to send
 * to one app, written in the transaction that ends the sign-ins it reports (grants.ts calls
 * `enqueueLogouts` from every revocation), drained by the background deliverer (src/backchannel-logout).
 * A row holds no token: the deliverer signs a fresh one at each attempt.
 */

/** The sign-in a revocation ended, as the grant row names it. */
export interface EndedSignIn {
  app_id: string;
  user_id: string;
  sid: string | null;
}

/**
 * Writes one delivery per distinct (app, user, sid) among `ended` whose app registered a back-channel
 * logout URI; an app without one gets nothing. One read of the apps when anything ended. Returns how
 * many deliveries were written.
 */
export async function enqueueLogouts(db: Kysely<Database>, at: number, ended: readonly EndedSignIn[]): Promise<number> {
  if (ended.length === 0) return 0;
  const appIds = [...new Set(ended.map((e) => e.app_id))];
  const listening = new Set(
    (await db.selectFrom('apps').select('id').where('id', 'in', appIds).where('backchannel_logout_uri', 'is not', null).where('disabled', '=', 0).execute()).map((a) => a.id),
  );
  if (listening.size === 0) return 0;
  const seen = new Set<string>();
  let written = 0;
  for (const e of ended) {
    if (!listening.has(e.app_id)) continue;
    const key = `${e.app_id} ${e.user_id} ${e.sid ?? ''}`;
    if (seen.has(key)) continue;
    seen.add(key);
    await db
      .insertInto('logout_deliveries')
      .values({ id: newId('blo'), app_id: e.app_id, user_id: e.user_id, sid: e.sid, status: 'pending', created_at: at, next_attempt_at: at })
      .execute();
    written++;
  }
  return written;
}

/** Deliveries due for an attempt, oldest first (candidates only: claim each before sending). */
export const listDueLogouts = (db: Kysely<Database>, now: number, limit: number): Promise<LogoutDeliveryRow[]> => listDueDeliveries(db, 'logout_deliveries', now, limit);

/** Claims a delivery for one deliverer until `lockedUntil`; false when another holds it or it is settled. */
export const claimLogout = (db: Kysely<Database>, id: string, now: number, lockedUntil: number): Promise<boolean> => claimDelivery(db, 'logout_deliveries', id, now, lockedUntil);

export interface LogoutOutcome {
  at: number;
  statusCode: number | null;
  error: string | null;
}

/** Records an attempt: delivered, retried at `nextAttemptAt`, or (null) settled as failed. */
export async function markLogoutAttempt(db: Kysely<Database>, id: string, outcome: LogoutOutcome, result: { delivered: true } | { delivered: false; nextAttemptAt: number | null }): Promise<void> {
  await db
    .updateTable('logout_deliveries')
    .set((eb) => ({
      status: result.delivered ? 'delivered' : result.nextAttemptAt === null ? 'failed' : 'pending',
      delivered_at: result.delivered ? outcome.at : null,
      next_attempt_at: result.delivered ? outcome.at : (result.nextAttemptAt ?? outcome.at),
      locked_until: null,
      attempts: eb('attempts', '+', 1),
      last_attempt_at: outcome.at,
      last_status_code: outcome.statusCode,
      last_error: outcome.error?.slice(0, 500) ?? null,
    }))
    .where('id', '=', id)
    .execute();
}

/** Settles a delivery as failed without an attempt (its app is gone, disabled or no longer listening). */
export async function failLogoutUnsent(db: Kysely<Database>, id: string, now: number, error: string): Promise<void> {
  await db.updateTable('logout_deliveries').set({ status: 'failed', locked_until: null, last_error: error.slice(0, 500), next_attempt_at: now }).where('id', '=', id).execute();
}

/**
 * Deletes the settled (delivered or failed) deliveries about a purged account (docs/account/deletion.md):
 * they name the person and are of no further use; pending ones stay, since the apps must still learn of it.
 */
export async function deleteSettledLogoutsOfUser(db: Kysely<Database>, userId: string): Promise<number> {
  const result = await db.deleteFrom('logout_deliveries').where('user_id', '=', userId).where('status', '!=', 'pending').executeTakeFirst();
  return Number(result.numDeletedRows);
}
