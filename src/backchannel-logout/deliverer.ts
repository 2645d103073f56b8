import type { FastifyBaseLogger } from 'fastify';
import type { Kysely } from 'kysely';
import type { JWTPayload } from 'jose';
import { send } from '../shared/outbound-post.js';
import { OutboxDeliverer } from '../shared/outbox-deliverer.js';
import type { TargetPolicy } from '../shared/targets.js';
import type { Clock } from '../shared/time.js';
import { findApp } from '../storage/repos/apps.js';
import { claimLogout, failLogoutUnsent, listDueLogouts, type LogoutDeliveryRow, markLogoutAttempt } from '../storage/repos/logout-deliveries.js';
import type { Database } from '../storage/schema.js';
import { LOGOUT_TOKEN_TTL, logoutClaims } from './token.js';

/**
 * The background deliverer of logout tokens (docs/guides/back-channel-logout.md), the webhook
 * deliverer's twin on the same machinery (shared/outbox-deliverer.ts, shared/outbound-post.ts): leased
 * rows, one attempt each, retried with exponential backoff and jitter for RETRY_FOR, then failed. Each attempt POSTs `logout_token=…` (form-encoded) to the app's URI as it
 * is registered at that moment, follows no redirect, and counts 200 and 204 as done.
 *
 * The token is signed at each attempt, not when the row is written: it lives only LOGOUT_TOKEN_TTL
 * seconds (a receiver refuses an old one), retries run for hours, and no bearer-like JWT sits in the
 * database; its `jti` is the row's id on every attempt.
 */


export interface LogoutDelivererDeps {
  db: Kysely<Database>;
  clock: Clock;
  log: FastifyBaseLogger;
  policy: TargetPolicy;
  /** Signs a logout token (adds `iss`, `iat`, `exp`). */
  sign(claims: JWTPayload, options: { alg: 'RS256'; typ: 'logout+jwt'; expiresIn: number }): Promise<string>;
}

export class LogoutDeliverer extends OutboxDeliverer<LogoutDeliveryRow> {
  constructor(private readonly deps: LogoutDelivererDeps) {
    const queue = { listDue: (now: number, limit: number) => listDueLogouts(deps.db, now, limit), claim: (row: LogoutDeliveryRow, now: number, until: number) => claimLogout(deps.db, row.id, now, until), keyOf: (row: LogoutDeliveryRow) => row.app_id };
    super(deps.clock, deps.log, queue, { job: 'back-channel logout', message: 'back-channel logout', idField: 'logout_id' });
  }

  protected async attempt(row: LogoutDeliveryRow): Promise<void> {
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
    const { attempts, retryIn } = this.nextAttempt(row, now);
    await markLogoutAttempt(db, row.id, { ...outcome, error: outcome.error ?? `HTTP ${result.statusCode}` }, { delivered: false, nextAttemptAt: retryIn === null ? null : now + retryIn });
    log.info({ logout_id: row.id, app_id: row.app_id, attempts, status: result.statusCode, error: result.error, retry_in: retryIn }, retryIn === null ? 'back-channel logout failed for good' : 'back-channel logout attempt failed; will retry');
  }
}
