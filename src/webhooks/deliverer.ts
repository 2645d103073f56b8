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
import { send, TIMEOUT_MS } from '../shared/outbound-post.js';
import { drainDue, retryDelay } from '../shared/outbox-drain.js';
import { signatureHeader } from './signing.js';
import type { TargetPolicy } from '../shared/targets.js';
import { BackgroundPasses } from '../shared/background-passes.js';

/**
 * The background deliverer (docs/webhooks.md), built like the mail sender (mail/index.ts): started when
 * the app is ready and stopped when it closes, it polls every second (and is nudged after a change),
 * claims due deliveries with `locked_until` — so several processes never send one message at once —
 * and makes one attempt each. A failed attempt is retried with exponential backoff and jitter; a
 * message still undelivered RETRY_FOR after it was written is marked failed. An endpoint whose attempts
 * have failed without a single success for DISABLE_AFTER is disabled, and the developer sees why.
 */

/** Longer than an attempt can take, so a lease never runs out under a live attempt. */
const LEASE_SECONDS = Math.ceil(TIMEOUT_MS / 1000) * 6;
export const RETRY_FOR = 24 * 3600;
export const DISABLE_AFTER = 3 * 24 * 3600;
const PARALLEL = 20;
const PER_ENDPOINT = 10;


export interface DelivererDeps {
  db: Kysely<Database>;
  clock: Clock;
  log: FastifyBaseLogger;
  /** Opens the sealed signing secrets. */
  secrets: SecretBox;
  policy: TargetPolicy;
}

export class WebhookDeliverer {
  private readonly passes: BackgroundPasses;

  constructor(private readonly deps: DelivererDeps) {
    this.passes = new BackgroundPasses(() => this.drain(), (error) => this.deps.log.error({ err: error }, 'webhook deliverer pass failed'));
  }

  /** Runs a delivery pass now (after a commit); harmless when one is running. */
  nudge(): void {
    this.passes.nudge();
  }

  /** Attempts every due delivery once (exposed for tests): up to PARALLEL at once, PER_ENDPOINT per endpoint (shared/outbox-drain.ts). */
  async drain(): Promise<void> {
    const { db, log } = this.deps;
    await drainDue(
      this.deps.clock,
      {
        listDue: (now, limit) => listDueWebhookDeliveries(db, now, limit),
        claim: (row, now, lockedUntil) => claimWebhookDelivery(db, row.id, now, lockedUntil),
        attempt: (row) => this.attempt(row),
        keyOf: (row) => row.endpoint_id,
        stopped: () => this.passes.isStopped,
        onError: (error, row) => log.error({ err: error, webhook_id: row.id }, 'webhook attempt failed unexpectedly'),
      },
      { parallel: PARALLEL, perKey: PER_ENDPOINT, leaseSeconds: LEASE_SECONDS },
    );
  }

  private async attempt(row: WebhookDeliveryRow): Promise<void> {
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
    const attempts = row.attempts + 1;
    const giveUp = now - row.created_at >= RETRY_FOR;
    const retryIn = retryDelay(attempts);
    await markWebhookAttemptFailed(db, row.id, outcome, giveUp ? null : now + retryIn);
    log.info({ webhook_id: row.id, endpoint_id: endpoint.id, type: row.type, attempts, status: result.statusCode, error: result.error, retry_in: giveUp ? null : retryIn }, giveUp ? 'webhook failed for good' : 'webhook attempt failed; will retry');
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

  start(): void {
    this.passes.start();
  }

  stop(): Promise<void> {
    return this.passes.stop();
  }
}
