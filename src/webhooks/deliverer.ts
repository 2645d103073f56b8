import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { SecretBox } from '../shared/crypto.js';
import type { Clock } from '../shared/time.js';
import { appendEvent } from '../storage/repos/events.js';
import {
  claimWebhookDelivery,
  disableWebhookEndpoint,
  failWebhookDeliveryUnsent,
  findWebhookEndpointById,
  listDueWebhookDeliveries,
  markWebhookAttemptFailed,
  markWebhookDelivered,
  markWebhookEndpointFailing,
  markWebhookEndpointHealthy,
  type WebhookDeliveryRow,
  type WebhookEndpointRow,
} from '../storage/repos/webhooks.js';
import type { Database } from '../storage/schema.js';
import { send } from '../shared/outbound-post.js';
import { OutboxDeliverer } from '../shared/outbox-deliverer.js';
import { signatureHeader } from './signing.js';
import type { TargetPolicy } from '../shared/targets.js';

/**
 * The background deliverer of webhooks (docs/webhooks.md) on the shared outbox machinery
 * (shared/outbox-deliverer.ts): due deliveries are claimed with `locked_until` — so several processes
 * never send one message at once — and attempted once each. A failed attempt is retried with
 * exponential backoff and jitter; a message still undelivered RETRY_FOR after it was written is marked
 * failed. An endpoint whose attempts have failed without a single success for DISABLE_AFTER is
 * disabled, and the developer sees why.
 */

export const DISABLE_AFTER = 3 * 24 * 3600;

export interface DelivererDeps {
  db: Kysely<Database>;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Opens the sealed signing secrets. */
  secrets: SecretBox;
  policy: TargetPolicy;
}

export class WebhookDeliverer extends OutboxDeliverer<WebhookDeliveryRow> {
  constructor(private readonly deps: DelivererDeps) {
    const queue = { listDue: (now: number, limit: number) => listDueWebhookDeliveries(deps.db, now, limit), claim: (row: WebhookDeliveryRow, now: number, until: number) => claimWebhookDelivery(deps.db, row.id, now, until), keyOf: (row: WebhookDeliveryRow) => row.endpoint_id };
    super(deps.clock, deps.log, queue, { job: 'webhook deliverer', message: 'webhook', idField: 'webhook_id' });
  }

  protected async attempt(row: WebhookDeliveryRow): Promise<void> {
    const { db, clock, log } = this.deps;
    const endpoint = await findWebhookEndpointById(db, row.endpoint_id);
    if (!endpoint || endpoint.enabled !== 1) {
      const why = endpoint ? 'endpoint disabled' : 'endpoint deleted';
      await failWebhookDeliveryUnsent(db, row.id, clock.now(), why);
      return;
    }
    // The header time is the wall clock's: receivers compare it with theirs (a 5-minute tolerance).
    const timestamp = Math.floor(Date.now() / 1000);
    const headers = {
      'webhook-id': row.id,
      'webhook-timestamp': String(timestamp),
      'webhook-signature': signatureHeader(this.signingSecrets(endpoint), row.id, timestamp, row.payload),
    };
    const result = await send({ url: endpoint.url, headers, body: row.payload }, this.deps.policy);
    const now = clock.now();
    const outcome = { at: now, statusCode: result.statusCode, error: result.error, response: result.excerpt };
    if (result.ok) {
      await markWebhookDelivered(db, row.id, outcome);
      await markWebhookEndpointHealthy(db, endpoint.id);
      log.debug({ webhook_id: row.id, endpoint_id: endpoint.id, type: row.type, status: result.statusCode }, 'webhook delivered');
      return;
    }
    const { attempts, retryIn } = this.nextAttempt(row, now);
    await markWebhookAttemptFailed(db, row.id, outcome, retryIn === null ? null : now + retryIn);
    log.info({ webhook_id: row.id, endpoint_id: endpoint.id, type: row.type, attempts, status: result.statusCode, error: result.error, retry_in: retryIn }, retryIn === null ? 'webhook failed for good' : 'webhook attempt failed; will retry');
    const failingSince = await markWebhookEndpointFailing(db, endpoint.id, now);
    if (failingSince !== null && now - failingSince >= DISABLE_AFTER) await this.disableFailing(endpoint, now, failingSince);
  }

  private async disableFailing(endpoint: WebhookEndpointRow, now: number, failingSince: number): Promise<void> {
    await this.deps.db.transaction().execute(async (trx) => {
      if (!(await disableWebhookEndpoint(trx, endpoint.id, 'failing', now))) return;
      await appendEvent(trx, now, { type: 'webhook.endpoint_disabled', appId: endpoint.app_id, data: { endpoint_id: endpoint.id, reason: 'failing', failing_since: failingSince } });
    });
    this.deps.log.warn({ endpoint_id: endpoint.id, app_id: endpoint.app_id }, 'webhook endpoint disabled after 3 days of failed deliveries');
  }

  /** The secrets that sign now: the current one, and the previous one until its overlap ends. */
  private signingSecrets(endpoint: WebhookEndpointRow): string[] {
    const secrets = [this.deps.secrets.open(endpoint.secret_sealed)];
    if (endpoint.previous_secret_sealed && (endpoint.previous_secret_expires_at ?? 0) > this.deps.clock.now()) secrets.push(this.deps.secrets.open(endpoint.previous_secret_sealed));
    return secrets;
  }
}
