import type { FastifyBaseLogger } from 'fastify';
import { BackgroundPasses } from './background-passes.js';
import { TIMEOUT_MS } from './outbound-post.js';
import { type DrainLimits, drainDue, retryDelay } from './outbox-drain.js';
import type { Clock } from './time.js';

/**
 * The background deliverer of a durable outbox of HTTP deliveries, shared by the webhook deliverer
 * (docs/webhooks.md) and the back-channel logout deliverer (docs/guides/back-channel-logout.md): started
 * when the app is ready and stopped when it closes, it runs a pass every second and when nudged after a
 * commit (shared/background-passes.ts); each pass claims due rows with a lease and attempts each once
 * (shared/outbox-drain.ts). A subclass says where its rows are (an OutboxQueue) and what one attempt does.
 */

/** How long a message is retried after it was written before it is marked failed. */
export const RETRY_FOR = 24 * 3600;

/** Up to 20 attempts at once, 10 to one destination; a lease outlives any attempt (10 s timeout). */
export const DELIVERY_LIMITS: DrainLimits = { parallel: 20, perKey: 10, leaseSeconds: Math.ceil(TIMEOUT_MS / 1000) * 6 };

/** What every outbox row carries. */
export interface OutboxRow {
  id: string;
  attempts: number;
  created_at: number;
}

export interface OutboxDelivererNames {
  /** The job in log lines, e.g. `webhook deliverer` ("… pass failed"). */
  job: string;
  /** One message in log lines, e.g. `webhook` ("… attempt failed unexpectedly"). */
  message: string;
  /** The log field that carries a row's id, e.g. `webhook_id`. */
  idField: string;
}

/** Where a deliverer's rows are (its repo's statements). */
export interface OutboxQueue<R> {
  /** Due rows at `now` (leased ones excluded), oldest first. */
  listDue(now: number, limit: number): Promise<R[]>;
  /** Takes the lease of one row until `lockedUntil`; false when another process holds or settled it. */
  claim(row: R, now: number, lockedUntil: number): Promise<boolean>;
  /** The destination of a row (rows sharing it share the per-destination limit). */
  keyOf(row: R): string;
}

export abstract class OutboxDeliverer<R extends OutboxRow> {
  private readonly passes: BackgroundPasses;

  protected constructor(
    protected readonly clock: Clock,
    protected readonly log: FastifyBaseLogger,
    private readonly queue: OutboxQueue<R>,
    private readonly names: OutboxDelivererNames,
  ) {
    this.passes = new BackgroundPasses(() => this.drain(), (error) => this.log.error({ err: error }, `${names.job} pass failed`));
  }

  /** One attempt, which records its own outcome. */
  protected abstract attempt(row: R): Promise<void>;

  /** Runs a delivery pass now (after a commit); harmless when one is running. */
  nudge(): void {
    this.passes.nudge();
  }

  /** Attempts every due row once (exposed for tests). */
  async drain(): Promise<void> {
    await drainDue(
      this.clock,
      {
        ...this.queue,
        attempt: (row) => this.attempt(row),
        stopped: () => this.passes.isStopped,
        onError: (error, row) => this.log.error({ err: error, [this.names.idField]: row.id }, `${this.names.message} attempt failed unexpectedly`),
      },
      DELIVERY_LIMITS,
    );
  }

  /**
   * After a failed attempt at `now`: the attempts so far, and the seconds until the next one
   * (exponential backoff with jitter), or null once the row is RETRY_FOR old and is marked failed.
   */
  protected nextAttempt(row: R, now: number): { attempts: number; retryIn: number | null } {
    const attempts = row.attempts + 1;
    return { attempts, retryIn: now - row.created_at >= RETRY_FOR ? null : retryDelay(attempts) };
  }

  start(): void {
    this.passes.start();
  }

  stop(): Promise<void> {
    return this.passes.stop();
  }
}
