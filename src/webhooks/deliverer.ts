import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { randomInt } from 'node:crypto';
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
import { send, TIMEOUT_MS } from './sender.js';
import { signatureHeader } from './signing.js';
import type { TargetPolicy } from './targets.js';
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

/** Seconds before the next attempt after `attempts` failed ones: 5 s doubling to at most 1 h, ±20 % jitter. */
export function retryDelay(attempts: number): number {
  const base = Math.min(5 * 2 ** Math.max(0, attempts - 1), 3600);
  return Math.max(1, Math.round(base * (0.8 + randomInt(0, 401) / 1000)));
}

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

  /**
   * Attempts every due delivery once (exposed for tests). Up to PARALLEL attempts run at once, at most
   * PER_ENDPOINT of them to one endpoint, and a finished one makes room for the next: an endpoint that
   * answers slowly (or not at all, for 10 s) holds a few slots, never the others' deliveries.
   */
  async drain(): Promise<void> {
    const inFlight = new Set<Promise<void>>();
    const perEndpoint = new Map<string, number>();
    for (;;) {
      const now = this.deps.clock.now();
      // Rows claimed here have a lease, so the due list never returns them while they are in flight.
      // Once stopped (shutdown), the attempts in hand finish and nothing new is claimed.
      const due = inFlight.size < PARALLEL && !this.passes.isStopped ? await listDueWebhookDeliveries(this.deps.db, now, PARALLEL * PER_ENDPOINT) : [];
      let started = 0;
      for (const row of due) {
        if (inFlight.size >= PARALLEL) break;
        if ((perEndpoint.get(row.endpoint_id) ?? 0) >= PER_ENDPOINT) continue;
        if (!(await claimWebhookDelivery(this.deps.db, row.id, now, now + LEASE_SECONDS))) continue;
        started++;
        perEndpoint.set(row.endpoint_id, (perEndpoint.get(row.endpoint_id) ?? 0) + 1);
        const attempt: Promise<void> = this.attempt(row)
          .catch((error) => this.deps.log.error({ err: error, webhook_id: row.id }, 'webhook attempt failed unexpectedly'))
          .finally(() => {
            inFlight.delete(attempt);
            perEndpoint.set(row.endpoint_id, (perEndpoint.get(row.endpoint_id) ?? 1) - 1);
          });
        inFlight.add(attempt);
      }
      if (inFlight.size === 0) return;
      // Nothing new could start (all due rows busy or held elsewhere): wait for one attempt to end.
      if (started === 0 || inFlight.size >= PARALLEL) await Promise.race(inFlight);
    }
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
