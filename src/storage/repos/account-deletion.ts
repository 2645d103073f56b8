import { type Kysely, sql } from 'kysely';
import { deletePasswordHistoryOfUser } from './password-history.js';
import type { Database } from '../schema.js';
import { appendEvent } from './events.js';
import { deleteWebhookDeliveriesOfUser } from './webhooks.js';
import { deleteSettledLogoutsOfUser } from './logout-deliveries.js';
import { revokeGrantsOfUser } from './grants.js';

/**
 * The statements of account deletion (docs/account/deletion.md): scheduling and cancelling it on the
 * user row, finding the accounts whose grace is over, and the purge of one account.
 *
 * The purge's checklist is every table that holds a person's data (src/storage/repos/account-export.ts
 * reads the same ones): the user row itself is deleted, so a new registration with the same address
 * works at once and no foreign key is left dangling (every child table references users.id and is
 * emptied here explicitly, before the row goes; ON DELETE CASCADE would catch what a later table adds).
 * Events stay, reduced to their type, app, time and user id (ip, user agent and data cleared).
 */

/** Marks the account for deletion at `dueAt`; false when it is not active or already scheduled. */
export async function scheduleUserDeletion(db: Kysely<Database>, userId: string, dueAt: number, now: number): Promise<boolean> {
  const result = await db
    .updateTable('users')
    .set({ deletion_scheduled_at: dueAt, updated_at: now })
    .where('id', '=', userId)
    .where('status', '=', 'active')
    .where('deletion_scheduled_at', 'is', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** Lifts a scheduled deletion; false when none was scheduled (or the account is gone). */
export async function cancelUserDeletion(db: Kysely<Database>, userId: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('users')
    .set({ deletion_scheduled_at: null, updated_at: now })
    .where('id', '=', userId)
    .where('deletion_scheduled_at', 'is not', null)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** The accounts whose grace is over at `now`, the longest due first (users_deletion_due_idx). */
export async function listDueDeletions(db: Kysely<Database>, now: number, limit: number): Promise<string[]> {
  const rows = await db
    .selectFrom('users')
    .select('id')
    .where('deletion_scheduled_at', 'is not', null)
    .where('deletion_scheduled_at', '<=', now)
    .orderBy('deletion_scheduled_at')
    .limit(limit)
    .execute();
  return rows.map((r) => r.id);
}

/** `%`, `_` and the escape character are literal in a LIKE pattern. */
const escapeLike = (text: string): string => text.replace(/[!%_]/g, (c) => `!${c}`);

/**
 * Purges one account whose deletion is due at `now`, in the transaction `trx`, and records `user.deleted`
 * once per app the person was a member of (app_id set, so webhooks can tell each app) plus once with no
 * app (the platform's record). Returns false, having written nothing, when the account is not due (gone,
 * cancelled, or purged by another process meanwhile).
 *
 * Safe with several processes: the first statement is a conditional write on the user row, so a second
 * purger (or a cancel) waits for the first transaction and then finds nothing to do.
 */
export async function purgeDeletedAccount(trx: Kysely<Database>, userId: string, now: number): Promise<boolean> {
  // Takes the row (a no-op write that locks it on PostgreSQL; SQLite has one writer anyway).
  const claimed = await trx
    .updateTable('users')
    .set((eb) => ({ updated_at: eb.ref('updated_at') }))
    .where('id', '=', userId)
    .where('deletion_scheduled_at', 'is not', null)
    .where('deletion_scheduled_at', '<=', now)
    .executeTakeFirst();
  if (Number(claimed.numUpdatedRows) !== 1) return false;
  const user = await trx.selectFrom('users').select(['id', 'email']).where('id', '=', userId).executeTakeFirstOrThrow();
  const memberships = await trx.selectFrom('app_users').select('app_id').where('user_id', '=', userId).orderBy('app_id').execute();

  // Apps still signed in (a grace of 0 scheduled and purges at once) get their back-channel logout first.
  await revokeGrantsOfUser(trx, userId, now, 'deleted');
  // Sign-in state: tokens, codes, grants, sessions, single-use secrets (also those mailed to the address).
  await trx.deleteFrom('refresh_tokens').where('grant_id', 'in', trx.selectFrom('grants').select('id').where('user_id', '=', userId)).execute();
  await trx.deleteFrom('authorization_codes').where('user_id', '=', userId).execute();
  await trx.deleteFrom('grants').where('user_id', '=', userId).execute();
  await trx.deleteFrom('browser_sessions').where('user_id', '=', userId).execute();
  await trx.deleteFrom('one_time_tokens').where((eb) => eb.or([eb('user_id', '=', userId), eb('email', '=', user.email)])).execute();
  // Factors and passkeys.
  await trx.deleteFrom('totp_factors').where('user_id', '=', userId).execute();
  await trx.deleteFrom('recovery_codes').where('user_id', '=', userId).execute();
  await trx.deleteFrom('passkeys').where('user_id', '=', userId).execute();
  // Previous password hashes (the reuse rule).
  await deletePasswordHistoryOfUser(trx, userId);
  // What the person gave or agreed to: provider bindings, profile documents, consents, acceptances, memberships.
  await trx.deleteFrom('provider_identities').where('user_id', '=', userId).execute();
  await trx.deleteFrom('profiles').where('user_id', '=', userId).execute();
  await trx.deleteFrom('consents').where('user_id', '=', userId).execute();
  await trx.deleteFrom('legal_acceptances').where('user_id', '=', userId).execute();
  await trx.deleteFrom('app_users').where('user_id', '=', userId).execute();
  // A developer record stays (the operator's), no longer linked to an account.
  await trx.updateTable('developers').set({ user_id: null }).where('user_id', '=', userId).execute();
  // Mail to the person, sent or not (bodies are sealed, the address is not), and counters keyed by them.
  await trx.deleteFrom('outbox').where('to_address', '=', user.email).execute();
  await trx
    .deleteFrom('throttle_counters')
    .where((eb) =>
      eb.or([
        sql<boolean>`${eb.ref('key')} like ${`%:${escapeLike(user.email)}`} escape '!'`,
        sql<boolean>`${eb.ref('key')} like ${`%:${escapeLike(userId)}`} escape '!'`,
      ]),
    )
    .execute();
  // Webhook deliveries about the person, pending too: each app learns of the purge from `user.deleted`.
  await deleteWebhookDeliveriesOfUser(trx, userId);
  // Logout tokens already sent (at scheduling); those the revocation above just queued must still go.
  await deleteSettledLogoutsOfUser(trx, userId);
  // Events: kept for the record, with nothing but the user id.
  await trx.updateTable('events').set({ ip: null, user_agent: null, data: '{}' }).where('user_id', '=', userId).execute();
  await trx.deleteFrom('users').where('id', '=', userId).execute();

  for (const appId of [...memberships.map((m) => m.app_id), null]) {
    await appendEvent(trx, now, { type: 'user.deleted', appId, userId, ip: null, userAgent: null, data: {} });
  }
  return true;
}
