import type { Insertable, Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import { endpointWants, payloadFor, type WebhookMessage } from '../../shared/webhook-events.js';
import { precompiled } from '../precompiled.js';
import type { Database, WebhookDeliveriesTable, WebhookDeliveryRow, WebhookEndpointRow, WebhookEndpointsTable } from '../schema.js';
import { COLUMNS } from '../columns.js';
import { claimDelivery, listDueDeliveries } from './delivery-queues.js';

export type { WebhookDeliveryRow, WebhookEndpointRow };

/**
 * Webhook endpoints and their deliveries (docs/webhooks.md). Deliveries are written by appendEvent in
 * the transaction of the change they report, and drained by the deliverer (webhooks/deliverer.ts)
 * with the mail outbox's claim-and-lease pattern.
 */

// Endpoints -------------------------------------------------------------------------------------------

export async function insertWebhookEndpoint(db: Kysely<Database>, row: Insertable<WebhookEndpointsTable>): Promise<void> {
  await db.insertInto('webhook_endpoints').values(row).execute();
}

export async function listWebhookEndpointsOfApp(db: Kysely<Database>, appId: string): Promise<WebhookEndpointRow[]> {
  return db.selectFrom('webhook_endpoints').select(COLUMNS.webhook_endpoints).where('app_id', '=', appId).orderBy('created_at').orderBy('id').execute();
}

export async function countWebhookEndpointsOfApp(db: Kysely<Database>, appId: string): Promise<number> {
  const row = await db.selectFrom('webhook_endpoints').select((eb) => eb.fn.countAll<number>().as('n')).where('app_id', '=', appId).executeTakeFirstOrThrow();
  return Number(row.n);
}

/** An endpoint of the app (undefined when the id is unknown or another app's). */
export async function findWebhookEndpoint(db: Kysely<Database>, appId: string, id: string): Promise<WebhookEndpointRow | undefined> {
  return db.selectFrom('webhook_endpoints').select(COLUMNS.webhook_endpoints).where('id', '=', id).where('app_id', '=', appId).executeTakeFirst();
}

export async function findWebhookEndpointById(db: Kysely<Database>, id: string): Promise<WebhookEndpointRow | undefined> {
  return db.selectFrom('webhook_endpoints').select(COLUMNS.webhook_endpoints).where('id', '=', id).executeTakeFirst();
}

export async function updateWebhookEndpoint(
  db: Kysely<Database>,
  id: string,
  patch: Partial<Pick<WebhookEndpointsTable, 'url' | 'description' | 'event_types' | 'enabled' | 'secret_sealed' | 'previous_secret_sealed' | 'previous_secret_expires_at' | 'failing_since' | 'disabled_reason' | 'disabled_at' | 'updated_at'>>,
): Promise<void> {
  await db.updateTable('webhook_endpoints').set(patch).where('id', '=', id).execute();
}

/** Deletes an endpoint and its deliveries (its log goes with it). */
export async function deleteWebhookEndpoint(db: Kysely<Database>, id: string): Promise<void> {
  await db.deleteFrom('webhook_deliveries').where('endpoint_id', '=', id).execute();
  await db.deleteFrom('webhook_endpoints').where('id', '=', id).execute();
}

/** Deletes every endpoint of an app and their deliveries (the app is being deleted). */
export async function deleteWebhooksOfApp(db: Kysely<Database>, appId: string): Promise<void> {
  await db.deleteFrom('webhook_deliveries').where('app_id', '=', appId).execute();
  await db.deleteFrom('webhook_endpoints').where('app_id', '=', appId).execute();
}

/** A success: the endpoint's run of failures (if any) is over. */
export async function markWebhookEndpointHealthy(db: Kysely<Database>, id: string): Promise<void> {
  await db.updateTable('webhook_endpoints').set({ failing_since: null }).where('id', '=', id).where('failing_since', 'is not', null).execute();
}

/** A failed attempt: starts the endpoint's run of failures unless one is under way; returns when it began. */
export async function markWebhookEndpointFailing(db: Kysely<Database>, id: string, now: number): Promise<number | null> {
  await db.updateTable('webhook_endpoints').set({ failing_since: now }).where('id', '=', id).where('failing_since', 'is', null).execute();
  const row = await db.selectFrom('webhook_endpoints').select('failing_since').where('id', '=', id).executeTakeFirst();
  return row?.failing_since ?? null;
}

/** The server disables an endpoint (e.g. failing for 3 days); true when this call did it. */
export async function disableWebhookEndpoint(db: Kysely<Database>, id: string, reason: string, now: number): Promise<boolean> {
  const result = await db
    .updateTable('webhook_endpoints')
    .set({ enabled: 0, disabled_reason: reason, disabled_at: now, updated_at: now })
    .where('id', '=', id)
    .where('enabled', '=', 1)
    .executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

// Fan-out (inside the change's transaction) -----------------------------------------------------------

// Precompiled: a sign-in records `user.login_succeeded`, which becomes `user.signed_in` for its app.
const enabledEndpointsOfApp = precompiled((db, appId: string) =>
  db.selectFrom('webhook_endpoints').select(['id', 'app_id', 'event_types']).where('app_id', '=', appId).where('enabled', '=', 1),
);

const enabledEndpointsOfUser = precompiled((db, userId: string, appId: string) =>
  db
    .selectFrom('webhook_endpoints')
    .select(['id', 'app_id', 'event_types'])
    .where('enabled', '=', 1)
    .where((eb) => eb.or([eb('app_id', 'in', eb.selectFrom('app_users').select('app_id').where('user_id', '=', userId)), eb('app_id', '=', appId)])),
);

/** Whether any webhook endpoint is enabled at all (a bulk write skips the per-event reads when none is). */
export async function anyEnabledWebhookEndpoint(db: Kysely<Database>): Promise<boolean> {
  return (await db.selectFrom('webhook_endpoints').select('id').where('enabled', '=', 1).limit(1).executeTakeFirst()) !== undefined;
}

/**
 * Writes one delivery per enabled endpoint that wants `message`, of the apps its scope names: the event's
 * app (`app`), or every app the user is a user of now plus the event's app (`user`). One indexed read
 * when no endpoint wants it. Returns how many deliveries were written.
 */
export async function enqueueWebhookDeliveries(
  db: Kysely<Database>,
  at: number,
  event: { id: string; appId: string | null; userId: string },
  message: WebhookMessage,
): Promise<number> {
  const { rows } =
    message.scope === 'app'
      ? await enabledEndpointsOfApp(db, event.appId!)
      : await enabledEndpointsOfUser(db, event.userId, event.appId ?? '');
  let written = 0;
  for (const endpoint of rows) {
    if (!endpointWants(JSON.parse(endpoint.event_types) as string[], message.type)) continue;
    await insertWebhookDelivery(db, {
      id: newId('msg'),
      endpoint_id: endpoint.id,
      app_id: endpoint.app_id,
      event_id: event.id,
      user_id: event.userId,
      type: message.type,
      payload: payloadFor(message, event.userId, endpoint.app_id, at),
      status: 'pending',
      attempts: 0,
      created_at: at,
      next_attempt_at: at,
    });
    written++;
  }
  return written;
}

// Deliveries ------------------------------------------------------------------------------------------

export async function insertWebhookDelivery(db: Kysely<Database>, row: Insertable<WebhookDeliveriesTable>): Promise<void> {
  await db.insertInto('webhook_deliveries').values(row).execute();
}

/** Deliveries due for an attempt, oldest first (candidates only: claim each before sending). */
export const listDueWebhookDeliveries = (db: Kysely<Database>, now: number, limit: number): Promise<WebhookDeliveryRow[]> => listDueDeliveries(db, 'webhook_deliveries', now, limit);

/** Claims a delivery for one deliverer until `lockedUntil`; false when another holds it or it is settled. */
export const claimWebhookDelivery = (db: Kysely<Database>, id: string, now: number, lockedUntil: number): Promise<boolean> => claimDelivery(db, 'webhook_deliveries', id, now, lockedUntil);

export interface AttemptOutcome {
  at: number;
  statusCode: number | null;
  error: string | null;
  response: string | null;
}

export async function markWebhookDelivered(db: Kysely<Database>, id: string, outcome: AttemptOutcome): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      status: 'delivered',
      delivered_at: outcome.at,
      next_attempt_at: outcome.at,
      locked_until: null,
      attempts: eb('attempts', '+', 1),
      last_attempt_at: outcome.at,
      last_status_code: outcome.statusCode,
      last_error: null,
      last_response: outcome.response,
    }))
    .where('id', '=', id)
    .execute();
}

/** A failed attempt: retried at `nextAttemptAt`, or settled as failed when that is null. */
export async function markWebhookAttemptFailed(db: Kysely<Database>, id: string, outcome: AttemptOutcome, nextAttemptAt: number | null): Promise<void> {
  await db
    .updateTable('webhook_deliveries')
    .set((eb) => ({
      status: nextAttemptAt === null ? 'failed' : 'pending',
      next_attempt_at: nextAttemptAt ?? outcome.at,
      locked_until: null,
      attempts: eb('attempts', '+', 1),
      last_attempt_at: outcome.at,
      last_status_code: outcome.statusCode,
      last_error: outcome.error?.slice(0, 500) ?? null,
      last_response: outcome.response,
    }))
    .where('id', '=', id)
    .execute();
}

/** Settles a delivery as failed without an attempt (its endpoint is gone or disabled). */
export async function failWebhookDeliveryUnsent(db: Kysely<Database>, id: string, now: number, error: string): Promise<void> {
  await db.updateTable('webhook_deliveries').set({ status: 'failed', locked_until: null, last_error: error.slice(0, 500), next_attempt_at: now }).where('id', '=', id).execute();
}

/** An endpoint's deliveries, newest first, from the cursor (a delivery id) on. */
export async function listWebhookDeliveriesOfEndpoint(
  db: Kysely<Database>,
  endpointId: string,
  options: { before?: string; status?: WebhookDeliveryRow['status']; limit: number },
): Promise<WebhookDeliveryRow[]> {
  let q = db.selectFrom('webhook_deliveries').select(COLUMNS.webhook_deliveries).where('endpoint_id', '=', endpointId);
  if (options.before) q = q.where('id', '<', options.before);
  if (options.status) q = q.where('status', '=', options.status);
  return q.orderBy('id', 'desc').limit(options.limit).execute();
}

export async function findWebhookDelivery(db: Kysely<Database>, endpointId: string, id: string): Promise<WebhookDeliveryRow | undefined> {
  return db.selectFrom('webhook_deliveries').select(COLUMNS.webhook_deliveries).where('id', '=', id).where('endpoint_id', '=', endpointId).executeTakeFirst();
}

/** Queues a delivery again at once (manual redeliver): same `webhook-id`, so a receiver can tell it is the same message. */
export async function requeueWebhookDelivery(db: Kysely<Database>, id: string, now: number): Promise<void> {
  await db.updateTable('webhook_deliveries').set({ status: 'pending', next_attempt_at: now, locked_until: null, delivered_at: null }).where('id', '=', id).execute();
}

/**
 * Forgets what the delivery log holds about a user whose account is purged: every settled delivery about
 * them goes (a payload may carry their address). Pending ones stay to be delivered — `user.deleted`
 * among them — and are purged with the log once settled.
 */
/**
 * Every delivery about a person, pending ones too (their payloads may hold the person's addresses): the
 * account purge, before it records `user.deleted` (docs/account/deletion.md).
 */
export async function deleteWebhookDeliveriesOfUser(db: Kysely<Database>, userId: string): Promise<number> {
  const result = await db.deleteFrom('webhook_deliveries').where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numDeletedRows);
}

export async function countPendingWebhookDeliveries(db: Kysely<Database>): Promise<number> {
  const row = await db.selectFrom('webhook_deliveries').select((eb) => eb.fn.countAll<number>().as('n')).where('status', '=', 'pending').executeTakeFirstOrThrow();
  return Number(row.n);
}

