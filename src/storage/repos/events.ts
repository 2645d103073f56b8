import { type Kysely, sql } from 'kysely';
import { newId } from '../../shared/ids.js';
import { precompiled } from '../precompiled.js';
import type { Database, EventRow } from '../schema.js';
import { COLUMNS, qualified } from '../columns.js';
import { mayBecomeWebhook, webhookFor } from '../../shared/webhook-events.js';
import { anyEnabledWebhookEndpoint, enqueueWebhookDeliveries } from './webhooks.js';

/** Audit event types (the events API lists them). */
export type EventType =
  | 'user.registered'
  | 'user.login_succeeded'
  | 'user.login_failed'
  | 'user.locked'
  | 'token.refresh_reuse_detected'
  | 'code.replay_detected'
  | 'idp.bound'
  | 'idp.unbound'
  | 'password.reset_requested'
  | 'password.reset'
  | 'password.rehashed'
  | 'users.imported'
  | 'users.exported'
  | 'email.verified'
  | 'consent.granted'
  | 'consent.revoked'
  | 'profile.updated'
  | 'profile.deleted'
  | 'app.user_blocked'
  | 'app.user_unblocked'
  | 'user.claimed'
  | 'user.email_changed'
  | 'user.deletion_scheduled'
  | 'user.deletion_cancelled'
  | 'user.deleted'
  | 'mfa.enrolled'
  | 'mfa.removed'
  | 'mfa.challenge_failed'
  | 'mfa.recovery_codes_generated'
  | 'mfa.reset'
  | 'passkey.registered'
  | 'passkey.removed'
  | 'app.created'
  | 'app.updated'
  | 'app.deleted'
  | 'app.secret_rotated'
  | 'legal.published'
  | 'developer.invited'
  | 'developer.linked'
  | 'developer.api_key_created'
  | 'developer.api_key_revoked'
  | 'session.revoked'
  | 'user.disabled'
  | 'user.enabled'
  | 'user.signed_out'
  | 'legal.accepted'
  | 'webhook.endpoint_disabled';

export interface EventInput {
  type: EventType;
  appId?: string | null;
  userId?: string | null;
  ip?: string | null;
  userAgent?: string | null;
  /** Never a password, token, code or secret. */
  data?: Record<string, unknown>;
}

// Precompiled: most writes append an event, a sign-in among them.
const insertEvent = precompiled(
  (db, id: string, type: string, appId: string | null, userId: string | null, ip: string | null, userAgent: string | null, at: number, data: string) =>
    db.insertInto('events').values({ id, type, app_id: appId, user_id: userId, ip, user_agent: userAgent, at, data }),
);

/**
 * Appends an audit event, and in the same statement sequence (so in the caller's transaction) one
 * webhook delivery per endpoint that wants it (docs/webhooks.md): a webhook is never lost to a crash
 * after its change committed, and never sent for a change that rolled back. An event type that never
 * becomes a webhook costs nothing more; one that may costs one indexed read of the endpoints.
 */
export async function appendEvent(db: Kysely<Database>, at: number, event: EventInput): Promise<void> {
  const userAgent = event.userAgent ? event.userAgent.slice(0, 512) : null;
  const id = newId('evt');
  await insertEvent(db, id, event.type, event.appId ?? null, event.userId ?? null, event.ip ?? null, userAgent, at, JSON.stringify(event.data ?? {}));
  if (!event.userId || !mayBecomeWebhook(event.type)) return;
  const message = webhookFor(event);
  if (message) await enqueueWebhookDeliveries(db, at, { id, appId: event.appId ?? null, userId: event.userId }, message);
}

/**
 * Appends many audit events at once (a bulk import), with their webhook deliveries as appendEvent
 * writes them: multi-row inserts, and the per-event endpoint reads only when some endpoint is enabled.
 */
export async function appendEvents(db: Kysely<Database>, at: number, events: readonly EventInput[]): Promise<void> {
  const rows = events.map((event) => ({
    id: newId('evt'),
    type: event.type,
    app_id: event.appId ?? null,
    user_id: event.userId ?? null,
    ip: event.ip ?? null,
    user_agent: event.userAgent ? event.userAgent.slice(0, 512) : null,
    at,
    data: JSON.stringify(event.data ?? {}),
  }));
  // 500 rows × 8 columns: well under either database's bound on statement parameters.
  for (let i = 0; i < rows.length; i += 500) await db.insertInto('events').values(rows.slice(i, i + 500)).execute();
  if (!events.some((e) => e.userId && mayBecomeWebhook(e.type)) || !(await anyEnabledWebhookEndpoint(db))) return;
  for (const [i, event] of events.entries()) {
    if (!event.userId || !mayBecomeWebhook(event.type)) continue;
    const message = webhookFor(event);
    if (message) await enqueueWebhookDeliveries(db, at, { id: rows[i]!.id, appId: event.appId ?? null, userId: event.userId }, message);
  }
}

export async function listEventsOfApp(
  db: Kysely<Database>,
  appId: string,
  options: { type?: string; after?: string; limit: number },
): Promise<EventRow[]> {
  let q = db.selectFrom('events').select(COLUMNS.events).where('app_id', '=', appId);
  if (options.type) q = q.where('type', '=', options.type);
  if (options.after) q = q.where('id', '>', options.after);
  return q.orderBy('id', 'asc').limit(options.limit).execute();
}

/**
 * Event types whose rows an outsider can cause whether or not the named account exists (a failed
 * password for any address, the lockout of any address): the only ones a developer sees about people
 * who are not users of its app, and then without their user id (SECURITY hardening item 8).
 */
export const ACCOUNT_NEUTRAL_EVENT_TYPES: readonly string[] = ['user.login_failed', 'user.locked'];

/** What a developer did to its own app (no user in them): listed to that developer. */
export const DEVELOPER_ACTION_EVENT_TYPES: readonly string[] = ['app.created', 'app.updated', 'app.secret_rotated', 'legal.published'];

export interface AppVisibleEventRow extends EventRow {
  /** 1 when `user_id` is a user of the app (an `app_users` row exists now), else 0. */
  member: number;
}

/**
 * The events of an app as its developer may see them, in id order: an event about a user of the app
 * (an `app_users` row, checked at read time so rows written before this rule are covered too), or an
 * event of `ACCOUNT_NEUTRAL_EVENT_TYPES` about anyone else (no user, or a user of other apps only), or
 * one of the developer's own changes (`DEVELOPER_ACTION_EVENT_TYPES`).
 * Anything else — e.g. a reset requested for an address that exists — would reveal an account and is
 * left out. Callers must still blank `user_id` when `member` is 0.
 */
export async function listEventsVisibleToApp(
  db: Kysely<Database>,
  appId: string,
  options: { type?: string; after?: string; userId?: string; newestFirst?: boolean; limit: number },
): Promise<AppVisibleEventRow[]> {
  let q = db
    .selectFrom('events as e')
    .leftJoin('app_users as au', (join) => join.onRef('au.app_id', '=', 'e.app_id').onRef('au.user_id', '=', 'e.user_id'))
    .select(qualified('e', COLUMNS.events))
    .select(sql<number>`case when au.user_id is null then 0 else 1 end`.as('member'))
    .where('e.app_id', '=', appId)
    .where((eb) => eb.or([eb('au.user_id', 'is not', null), eb('e.type', 'in', [...ACCOUNT_NEUTRAL_EVENT_TYPES, ...DEVELOPER_ACTION_EVENT_TYPES])]));
  if (options.type) q = q.where('e.type', '=', options.type);
  if (options.after) q = q.where('e.id', '>', options.after);
  if (options.userId) q = q.where('e.user_id', '=', options.userId);
  const rows = await q.orderBy('e.id', options.newestFirst ? 'desc' : 'asc').limit(options.limit).execute();
  return rows.map((row) => ({ ...row, member: Number(row.member) }));
}
