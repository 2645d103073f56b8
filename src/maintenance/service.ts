import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import { setTimeout as sleep } from 'node:timers/promises';
import type { ResolvedConfig } from '../config.js';
import type { Clock } from '../shared/time.js';
import type { Dialect } from '../storage/connect.js';
import { PURGE_STEPS, type PurgeCutoffs, type PurgeTable, withPurgeLock } from '../storage/repos/purge.js';
import type { Database } from '../storage/schema.js';

/**
 * The purge of expired rows (SECURITY hardening item 6). Each run deletes, table by table, in batches
 * of PURGE_BATCH_SIZE rows with a short pause between full batches:
 * - authorization codes, refresh tokens, one-time tokens and browser sessions that expired, were
 *   consumed or were revoked more than GRACE ago (a day; at least REFRESH_REUSE_GRACE): within the
 *   grace a replayed code or a reused refresh token is still recognised and revokes what it produced;
 * - grants revoked or expired more than GRACE ago, once none of their refresh tokens is left;
 * - throttle counters untouched for longer than every window (LOGIN_LOCK_SECONDS, the hourly mail
 *   limit, daily caps) and not locked;
 * - outbox mail delivered, or never delivered and long abandoned, more than OUTBOX_RETENTION_DAYS ago;
 * - events older than EVENT_RETENTION_DAYS (0 keeps them forever);
 * - webhook deliveries delivered or failed more than OUTBOX_RETENTION_DAYS ago;
 * - before all of these, accounts whose deletion grace is over (docs/account/deletion.md): each purged
 *   in its own transaction, `accounts_deleted` in the log line.
 * Every process runs it every PURGE_INTERVAL_SECONDS (0: never; `gatehouse purge` runs it once), the
 * first time at a random point between half an interval and one interval after start, so instances
 * started together spread out. Runs are idempotent; on PostgreSQL an advisory lock lets one instance
 * work at a time (the others skip that run). "Now" is the injectable clock. Counts per table are
 * logged at info (no row content).
 */

export type PurgeCounts = Record<PurgeTable, number>;

const DAY = 86400;
const HOUR = 3600;
/** Pause between two full batches, so other writers get the database in between. */
const BATCH_PAUSE_MS = 50;

export interface PurgeDeps {
  db: Kysely<Database>;
  dialect: Dialect;
  clock: Clock;
  config: ResolvedConfig;
  log: FastifyBaseLogger;
  /** The purge of accounts whose deletion grace is over (docs/account/deletion.md), run first in each run. */
  deletions?: { purgeDue(db: Kysely<Database>, now: number, batch: number): Promise<number> };
}

export class Purger {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<PurgeCounts | null> | null = null;
  private closing = false;

  constructor(private readonly deps: PurgeDeps) {}

  /** How long after being dead a code, token, grant or session is kept. */
  get graceSeconds(): number {
    return Math.max(DAY, this.deps.config.ttl.refreshReuseGrace);
  }

  /** The instants a run at `now` deletes against. */
  cutoffs(now: number): PurgeCutoffs {
    const { throttle, purge } = this.deps.config;
    const longestWindow = Math.max(throttle.loginLockSeconds, throttle.mailIntervalSeconds, HOUR, DAY);
    return {
      now,
      dead: now - this.graceSeconds,
      throttle: now - longestWindow,
      outbox: now - Math.max(1, purge.outboxRetentionDays) * DAY,
      events: purge.eventRetentionDays > 0 ? now - purge.eventRetentionDays * DAY : null,
    };
  }

  /**
   * One purge now; resolves to the rows deleted per table, or null when another instance holds the
   * PostgreSQL lock (nothing was done). A run already going in this process is joined, not repeated.
   */
  runOnce(): Promise<PurgeCounts | null> {
    this.running ??= this.run().finally(() => {
      this.running = null;
    });
    return this.running;
  }

  private async run(): Promise<PurgeCounts | null> {
    const { db, dialect, clock, config, log } = this.deps;
    const started = Date.now();
    const cut = this.cutoffs(clock.now());
    const batchSize = config.purge.batchSize;
    const counts = Object.fromEntries(PURGE_STEPS.map((step) => [step.table, 0])) as PurgeCounts;
    let accountsDeleted = 0;
    const complete = await withPurgeLock(db, dialect, async (conn) => {
      if (this.deps.deletions && !this.closing) accountsDeleted = await this.deps.deletions.purgeDue(conn, cut.now, batchSize);
      for (const step of PURGE_STEPS) {
        for (;;) {
          if (this.closing) return false;
          const n = await step.deleteBatch(conn, cut, batchSize);
          counts[step.table] += n;
          if (n < batchSize) break;
          await sleep(BATCH_PAUSE_MS);
        }
      }
      return true;
    });
    if (complete === null) {
      log.debug('purge skipped: another instance is purging');
      return null;
    }
    const total = Object.values(counts).reduce((a, b) => a + b, 0);
    log.info({ purged: counts, total, accounts_deleted: accountsDeleted, complete, ms: Date.now() - started }, complete ? 'purge finished' : 'purge interrupted by shutdown');
    return counts;
  }

  /** Starts the background job (no-op when PURGE_INTERVAL_SECONDS is 0). */
  start(): void {
    const interval = this.deps.config.purge.intervalSeconds;
    if (interval === 0 || this.timer || this.closing) return;
    this.schedule(interval * 1000 * (0.5 + Math.random() / 2));
  }

  private schedule(delayMs: number): void {
    this.timer = setTimeout(() => {
      this.timer = null;
      this.runOnce()
        .catch((error) => this.deps.log.error({ err: error }, 'purge failed'))
        .finally(() => {
          if (!this.closing) this.schedule(this.deps.config.purge.intervalSeconds * 1000);
        });
    }, delayMs);
    this.timer.unref();
  }

  /** Stops the job: no new run starts, a running one stops after its current batch. */
  async stop(): Promise<void> {
    this.closing = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running?.catch(() => undefined);
  }
}
