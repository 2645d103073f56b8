import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { JWTPayload } from 'jose';
import { send, TIMEOUT_MS } from '../shared/outbound-post.js';
import { drainDue, retryDelay } from '../shared/outbox-drain.js';
import type { TargetPolicy } from '../shared/targets.js';
import { BackgroundPasses } from '../shared/background-passes.js';
import type { Clock } from '../shared/time.js';
import { findApp } from '../storage/repos/apps.js';
import { claimLogout, failLogoutUnsent, listDueLogouts, type LogoutDeliveryRow, markLogoutAttempt } from '../storage/repos/logout-deliveries.js';
import type { Database } from '../storage/schema.js';
import { LOGOUT_TOKEN_TTL, logoutClaims } from './token.js';

/**
 * The background deliverer of logout tokens (docs/guides/back-channel-logout.md), the webhook
 * deliverer's twin on the same machinery (shared/background-passes.ts, shared/outbox-drain.ts,
 * shared/outbound-post.ts): leased rows, one attempt each, retried with exponential backoff and jitter
 * for RETRY_FOR, then failed. Each attempt POSTs `logout_token=…` (form-encoded) to the app's URI as it
 * is registered at that moment, follows no redirect, and counts 200 and 204 as done.
 *
 * The token is signed at each attempt, not when the row is written: it lives only LOGOUT_TOKEN_TTL
 * seconds (a receiver refuses an old one), retries run for hours, and no bearer-like JWT sits in the
 * database; its `jti` is the row's id on every attempt.
 */

const LEASE_SECONDS = Math.ceil(TIMEOUT_MS / 1000) * 6;
export const RETRY_FOR = 24 * 3600;
const PARALLEL = 20;
const PER_APP = 10;

export interface LogoutDelivererDeps {
  db: Kysely<Database>;
  clock: Clock;
  log: FastifyBaseLogger;
  policy: TargetPolicy;
  /** Signs a logout token (adds `iss`, `iat`, `exp`). */
  sign(claims: JWTPayload, options: { alg: 'RS256'; typ: 'logout+jwt'; expiresIn: number }): Promise<string>;
}

export class LogoutDeliverer {
  private readonly passes: BackgroundPasses;

  constructor(private readonly deps: LogoutDelivererDeps) {
    this.passes = new BackgroundPasses(() => this.drain(), (error) => this.deps.log.error({ err: error }, 'back-channel logout pass failed'));
  }

  nudge(): void {
    this.passes.nudge();
  }

  /** Attempts every due logout once (exposed for tests). */
  async drain(): Promise<void> {
    const { db, log } = this.deps;
    await drainDue(
      this.deps.clock,
      {
        listDue: (now, limit) => listDueLogouts(db, now, limit),
        claim: (row, now, lockedUntil) => claimLogout(db, row.id, now, lockedUntil),
        attempt: (row) => this.attempt(row),
        keyOf: (row) => row.app_id,
        stopped: () => this.passes.isStopped,
        onError: (error, row) => log.error({ err: error, logout_id: row.id }, 'back-channel logout attempt failed unexpectedly'),
      },
      { parallel: PARALLEL, perKey: PER_APP, leaseSeconds: LEASE_SECONDS },
    );
  }

  private async attempt(row: LogoutDeliveryRow): Promise<void> {
    const { db, clock, log } = this.deps;
    const app = await findApp(db, row.app_id);
    const uri = app && !app.disabled ? app.backchannelLogout.uri : null;
    if (!uri) {
      await failLogoutUnsent(db, row.id, clock.now(), app ? (app.disabled ? 'app disabled' : 'no back-channel logout URI') : 'app deleted');
      return;
    }
    const token = await this.deps.sign(logoutClaims({ id: row.id, appId: row.app_id, userId: row.user_id, sid: row.sid }), { alg: 'RS256', typ: 'logout+jwt', expiresIn: LOGOUT_TOKEN_TTL });
    const result = await send(
      { url: uri, headers: { 'cache-control': 'no-store' }, body: new URLSearchParams({ logout_token: token }).toString(), contentType: 'application/x-www-form-urlencoded', userAgent: 'Gatehouse-Logout/1' },
      this.deps.policy,
    );
    const now = clock.now();
    const outcome = { at: now, statusCode: result.statusCode, error: result.error };
    // §2.8: 200 is success; 204 is accepted too (many receivers answer so). Any other 2xx is not.
    if (result.statusCode === 200 || result.statusCode === 204) {
      await markLogoutAttempt(db, row.id, outcome, { delivered: true });
      log.debug({ logout_id: row.id, app_id: row.app_id, status: result.statusCode }, 'back-channel logout delivered');
      return;
    }
    const attempts = row.attempts + 1;
    const giveUp = now - row.created_at >= RETRY_FOR;
    const retryIn = retryDelay(attempts);
    await markLogoutAttempt(db, row.id, { ...outcome, error: outcome.error ?? `HTTP ${result.statusCode}` }, { delivered: false, nextAttemptAt: giveUp ? null : now + retryIn });
    log.info({ logout_id: row.id, app_id: row.app_id, attempts, status: result.statusCode, error: result.error, retry_in: giveUp ? null : retryIn }, giveUp ? 'back-channel logout failed for good' : 'back-channel logout attempt failed; will retry');
  }

  start(): void {
    this.passes.start();
  }

  stop(): Promise<void> {
    return this.passes.stop();
  }
}
