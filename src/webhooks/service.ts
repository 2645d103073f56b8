import type { Kysely } from 'kysely';
import type { z } from 'zod';
import { AppError } from '../errors.js';
import type { SecretBox } from '../shared/crypto.js';
import { newId } from '../shared/ids.js';
import type { RequestContext } from '../shared/request-context.js';
import { isoTime, type Clock } from '../shared/time.js';
import { payloadFor, WEBHOOK_TEST_TYPE } from '../shared/webhook-events.js';
import { appendEvent } from '../storage/repos/events.js';
import {
  countWebhookEndpointsOfApp,
  deleteWebhookEndpoint,
  findWebhookDelivery,
  findWebhookEndpoint,
  insertWebhookDelivery,
  insertWebhookEndpoint,
  listWebhookDeliveriesOfEndpoint,
  listWebhookEndpointsOfApp,
  requeueWebhookDelivery,
  updateWebhookEndpoint,
  type WebhookDeliveryRow,
  type WebhookEndpointRow,
} from '../storage/repos/webhooks.js';
import type { Database } from '../storage/schema.js';
import type { CreateWebhookBody, DeliveriesQuery, RotateSecretBody, UpdateWebhookBody } from './schemas.js';
import { MAX_ENDPOINTS_PER_APP } from './schemas.js';
import { newSigningSecret } from './signing.js';
import { urlProblem, type TargetPolicy } from '../shared/targets.js';

/**
 * Webhook endpoints of an app and their delivery log (docs/webhooks.md): what the developer API and the
 * console both call, for an app the caller has already proved is theirs.
 */

export type WebhookEndpointView = ReturnType<typeof toEndpointView>;
export type WebhookDeliveryView = ReturnType<typeof toDeliveryView>;

const time = (value: number | null) => (value === null ? null : isoTime(Number(value)));

export function toEndpointView(row: WebhookEndpointRow, now: number) {
  const previousLive = row.previous_secret_sealed !== null && row.previous_secret_expires_at !== null && Number(row.previous_secret_expires_at) > now;
  return {
    id: row.id,
    app_id: row.app_id,
    url: row.url,
    description: row.description,
    event_types: JSON.parse(row.event_types) as string[],
    enabled: row.enabled === 1,
    disabled_reason: row.disabled_reason === 'failing' ? ('failing' as const) : null,
    disabled_at: time(row.disabled_at),
    failing_since: time(row.failing_since),
    previous_secret_expires_at: previousLive ? time(row.previous_secret_expires_at) : null,
    created_at: isoTime(Number(row.created_at)),
    updated_at: isoTime(Number(row.updated_at)),
  };
}

export function toDeliveryView(row: WebhookDeliveryRow) {
  return {
    id: row.id,
    endpoint_id: row.endpoint_id,
    type: row.type,
    event_id: row.event_id,
    status: row.status,
    attempts: Number(row.attempts),
    created_at: isoTime(Number(row.created_at)),
    next_attempt_at: row.status === 'pending' ? isoTime(Number(row.next_attempt_at)) : null,
    last_attempt_at: time(row.last_attempt_at),
    last_status_code: row.last_status_code === null ? null : Number(row.last_status_code),
    last_error: row.last_error,
    last_response: row.last_response,
    delivered_at: time(row.delivered_at),
    payload: row.payload,
  };
}

export interface WebhooksDeps {
  db: Kysely<Database>;
  clock: Clock;
  /** Seals the signing secrets with SECRET_KEY (as TOTP secrets are). */
  secrets: SecretBox;
  policy: TargetPolicy;
  /** Asks the deliverer for a pass now (after a commit). */
  nudge: () => void;
}

export class Webhooks {
  constructor(private readonly deps: WebhooksDeps) {}

  private checkUrl(url: string): void {
    const problem = urlProblem(url, this.deps.policy);
    if (problem) throw new AppError('invalid_request', { details: [{ path: 'body.url', message: problem }], detail: `webhook url refused: ${problem}` });
  }

  private async endpoint(appId: string, id: string): Promise<WebhookEndpointRow> {
    const row = await findWebhookEndpoint(this.deps.db, appId, id);
    if (!row) throw new AppError('not_found', { detail: `webhook ${id} is not of app ${appId}` });
    return row;
  }

  async list(appId: string) {
    const now = this.deps.clock.now();
    return (await listWebhookEndpointsOfApp(this.deps.db, appId)).map((row) => toEndpointView(row, now));
  }

  async get(appId: string, id: string) {
    return toEndpointView(await this.endpoint(appId, id), this.deps.clock.now());
  }

  async create(appId: string, input: z.output<typeof CreateWebhookBody>, ctx: RequestContext) {
    this.checkUrl(input.url);
    const now = this.deps.clock.now();
    const secret = newSigningSecret();
    const row: WebhookEndpointRow = {
      id: newId('whe'),
      app_id: appId,
      url: input.url,
      description: input.description,
      event_types: JSON.stringify(input.event_types),
      enabled: input.enabled ? 1 : 0,
      secret_sealed: this.deps.secrets.seal(secret),
      previous_secret_sealed: null,
      previous_secret_expires_at: null,
      failing_since: null,
      disabled_reason: null,
      disabled_at: null,
      created_at: now,
      updated_at: now,
    };
    await this.deps.db.transaction().execute(async (trx) => {
      if ((await countWebhookEndpointsOfApp(trx, appId)) >= MAX_ENDPOINTS_PER_APP) {
        throw new AppError('invalid_request', { message: `An app may have at most ${MAX_ENDPOINTS_PER_APP} webhook endpoints.`, detail: 'webhook endpoint limit' });
      }
      await insertWebhookEndpoint(trx, row);
      await appendEvent(trx, now, { type: 'app.updated', appId, ip: ctx.ip, userAgent: ctx.userAgent, data: { webhook: 'created', endpoint_id: row.id } });
    });
    return { ...toEndpointView(row, now), secret };
  }

  async update(appId: string, id: string, input: z.output<typeof UpdateWebhookBody>, ctx: RequestContext) {
    const current = await this.endpoint(appId, id);
    if (input.url !== undefined) this.checkUrl(input.url);
    const now = this.deps.clock.now();
    const patch: Parameters<typeof updateWebhookEndpoint>[2] = { updated_at: now };
    if (input.url !== undefined) patch.url = input.url;
    if (input.event_types !== undefined) patch.event_types = JSON.stringify(input.event_types);
    if (input.description !== undefined) patch.description = input.description;
    if (input.enabled !== undefined) {
      patch.enabled = input.enabled ? 1 : 0;
      // Enabled again by the developer: the server's reason and the run of failures are over.
      if (input.enabled) Object.assign(patch, { disabled_reason: null, disabled_at: null, failing_since: null });
      else if (current.enabled === 1) Object.assign(patch, { disabled_reason: null, disabled_at: now });
    }
    await this.deps.db.transaction().execute(async (trx) => {
      await updateWebhookEndpoint(trx, id, patch);
      await appendEvent(trx, now, { type: 'app.updated', appId, ip: ctx.ip, userAgent: ctx.userAgent, data: { webhook: 'updated', endpoint_id: id, fields: Object.keys(input) } });
    });
    return this.get(appId, id);
  }

  async remove(appId: string, id: string, ctx: RequestContext): Promise<void> {
    await this.endpoint(appId, id);
    const now = this.deps.clock.now();
    await this.deps.db.transaction().execute(async (trx) => {
      await deleteWebhookEndpoint(trx, id);
      await appendEvent(trx, now, { type: 'app.updated', appId, ip: ctx.ip, userAgent: ctx.userAgent, data: { webhook: 'deleted', endpoint_id: id } });
    });
  }

  /** A new secret, shown once; the current one keeps signing beside it for `overlap_seconds`. */
  async rotateSecret(appId: string, id: string, input: z.output<typeof RotateSecretBody>, ctx: RequestContext) {
    const current = await this.endpoint(appId, id);
    const now = this.deps.clock.now();
    const secret = newSigningSecret();
    const overlap = input.overlap_seconds;
    await this.deps.db.transaction().execute(async (trx) => {
      await updateWebhookEndpoint(trx, id, {
        secret_sealed: this.deps.secrets.seal(secret),
        previous_secret_sealed: overlap > 0 ? current.secret_sealed : null,
        previous_secret_expires_at: overlap > 0 ? now + overlap : null,
        updated_at: now,
      });
      await appendEvent(trx, now, { type: 'app.updated', appId, ip: ctx.ip, userAgent: ctx.userAgent, data: { webhook: 'secret_rotated', endpoint_id: id, overlap_seconds: overlap } });
    });
    return { ...(await this.get(appId, id)), secret };
  }

  async deliveries(appId: string, id: string, query: z.output<typeof DeliveriesQuery>) {
    await this.endpoint(appId, id);
    const limit = query.limit ?? 20;
    const rows = await listWebhookDeliveriesOfEndpoint(this.deps.db, id, { before: query.before, status: query.status, limit: limit + 1 });
    const page = rows.slice(0, limit);
    return { items: page.map(toDeliveryView), next_cursor: rows.length > limit ? page[page.length - 1]!.id : null };
  }

  /** Queues a delivery again now, with the same `webhook-id` (the endpoint must be enabled). */
  async redeliver(appId: string, id: string, deliveryId: string) {
    const endpoint = await this.endpoint(appId, id);
    if (endpoint.enabled !== 1) throw new AppError('conflict', { message: 'Enable the endpoint before redelivering to it.', detail: 'redeliver to a disabled endpoint' });
    const row = await findWebhookDelivery(this.deps.db, id, deliveryId);
    if (!row) throw new AppError('not_found', { detail: `delivery ${deliveryId} is not of webhook ${id}` });
    if (row.status === 'pending') return toDeliveryView(row);
    const now = this.deps.clock.now();
    await requeueWebhookDelivery(this.deps.db, row.id, now);
    this.deps.nudge();
    return toDeliveryView({ ...row, status: 'pending', next_attempt_at: now, delivered_at: null });
  }

  /** Queues a `webhook.test` message to this endpoint alone (no user in it). */
  async sendTest(appId: string, id: string) {
    const endpoint = await this.endpoint(appId, id);
    if (endpoint.enabled !== 1) throw new AppError('conflict', { message: 'Enable the endpoint before sending a test event to it.', detail: 'test to a disabled endpoint' });
    const now = this.deps.clock.now();
    const row: WebhookDeliveryRow = {
      id: newId('msg'),
      endpoint_id: id,
      app_id: appId,
      event_id: null,
      user_id: null,
      type: WEBHOOK_TEST_TYPE,
      payload: payloadFor({ type: WEBHOOK_TEST_TYPE, data: { endpoint_id: id, test: true } }, null, appId, now),
      status: 'pending',
      attempts: 0,
      created_at: now,
      next_attempt_at: now,
      locked_until: null,
      last_attempt_at: null,
      last_status_code: null,
      last_error: null,
      last_response: null,
      delivered_at: null,
    };
    await insertWebhookDelivery(this.deps.db, row);
    this.deps.nudge();
    return toDeliveryView(row);
  }
}
