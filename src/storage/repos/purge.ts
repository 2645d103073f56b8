import { type Expression, type ExpressionBuilder, type Kysely, type SqlBool, sql } from 'kysely';
import type { Dialect } from '../connect.js';
import type { Database } from '../schema.js';

/**
 * The purge of rows nobody can use any more (src/maintenance): one small DELETE per batch,
 * `DELETE FROM t WHERE pk IN (SELECT pk FROM t WHERE <rule> LIMIT n)` (portable to SQLite and
 * PostgreSQL), so no statement holds its locks for long. Deleting a row another instance already
 * deleted is a no-op, so concurrent purges are safe; on PostgreSQL `withPurgeLock` lets only one
 * instance work at a time anyway. Each rule is a range over an indexed column (migration
 * 2026-11-24T0500_purge_indexes). Never touched: users, apps, consents, profiles, legal documents,
 * acceptances and view counters (aggregates), signing keys, settings.
 */

export type PurgeTable =
  | 'authorization_codes'
  | 'refresh_tokens'
  | 'grants'
  | 'one_time_tokens'
  | 'browser_sessions'
  | 'throttle_counters'
  | 'seen_once'
  | 'pushed_authorization_requests'
  | 'device_authorizations'
  | 'outbox'
  | 'webhook_deliveries'
  | 'logout_deliveries'
  | 'events';

/** The instants (epoch seconds) one purge run deletes against; rows must be dead strictly before them. */
export interface PurgeCutoffs {
  now: number;
  /**
   * Codes, refresh tokens, grants, one-time tokens and browser sessions that expired, were consumed or
   * were revoked before this instant (now − grace: replay and reuse detection keep working meanwhile).
   */
  dead: number;
  /** Throttle counters last changed before this (now − the longest window) and not locked at `now`. */
  throttle: number;
  /** Mail delivered before this, or created before this and never delivered (long abandoned). */
  outbox: number;
  /** Events before this; null keeps every event. */
  events: number | null;
}

export interface PurgeStep {
  table: PurgeTable;
  /** What the step deletes (for logs and tests). */
  rule: string;
  /** Deletes at most `limit` rows matching the rule; returns how many it deleted. */
  deleteBatch(db: Kysely<Database>, cut: PurgeCutoffs, limit: number): Promise<number>;
}

/** Which rows of a table a rule deletes. */
type Filter = (eb: ExpressionBuilder<any, any>, cut: PurgeCutoffs) => Expression<SqlBool>;

/** A rule over one table, deleted by primary key in batches. */
function rule(table: PurgeTable, key: string, description: string, filter: Filter, off?: (cut: PurgeCutoffs) => boolean): PurgeStep {
  return {
    table,
    rule: description,
    deleteBatch: async (db, cut, limit) => {
      if (off?.(cut)) return 0;
      // One generic statement for every table: the rules' columns are checked by the tests, not the types.
      const any: Kysely<any> = db;
      const batch = any
        .selectFrom(table)
        .select(key)
        .where((eb) => filter(eb, cut))
        .limit(limit);
      const result = await any.deleteFrom(table).where(key, 'in', batch).executeTakeFirst();
      return Number(result.numDeletedRows);
    },
  };
}

const dead = (column: string): Filter => (eb, cut) => eb(column, '<', cut.dead);
const unlocked = (eb: ExpressionBuilder<any, any>, cut: PurgeCutoffs) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', cut.now)]);

/**
 * Every purge rule, in the order a run applies them; each is a range over an indexed column. Refresh
 * tokens go before grants: a grant is deleted only once no refresh token references it, so its
 * ON DELETE CASCADE never deletes an unbounded number of token rows in one statement.
 */
export const PURGE_STEPS: readonly PurgeStep[] = [
  rule('authorization_codes', 'code_hash', 'expired (and consumed, if at all) before the grace', (eb, cut) =>
    eb.and([eb('expires_at', '<', cut.dead), eb.or([eb('consumed_at', 'is', null), eb('consumed_at', '<', cut.dead)])]),
  ),
  // A refresh token never outlives its grant (expires_at = min(token TTL, grant expiry)).
  rule('refresh_tokens', 'token_hash', 'expired before the grace', dead('expires_at')),
  ...(['revoked_at', 'expires_at'] as const).map((column) =>
    rule('refresh_tokens', 'token_hash', `of a grant whose ${column} is before the grace`, (eb, cut) =>
      eb('grant_id', 'in', eb.selectFrom('grants').select('id').where(column, '<', cut.dead)),
    ),
  ),
  ...(['revoked_at', 'expires_at'] as const).map((column) =>
    rule('grants', 'id', `${column} before the grace, with no refresh token left`, (eb, cut) =>
      eb.and([eb(column, '<', cut.dead), eb.not(eb.exists(eb.selectFrom('refresh_tokens').select('token_hash').whereRef('refresh_tokens.grant_id', '=', 'grants.id')))]),
    ),
  ),
  rule('one_time_tokens', 'id', 'expired before the grace', dead('expires_at')),
  rule('one_time_tokens', 'id', 'consumed before the grace', dead('consumed_at')),
  rule('browser_sessions', 'id_hash', 'expired before the grace', dead('expires_at')),
  rule('browser_sessions', 'id_hash', 'revoked before the grace', dead('revoked_at')),
  rule('throttle_counters', 'key', 'untouched for longer than every window, and not locked', (eb, cut) =>
    eb.and([eb('updated_at', '<', cut.throttle), unlocked(eb, cut)]),
  ),
  rule('seen_once', 'key', 'expired before the grace', dead('expires_at')),
  rule('pushed_authorization_requests', 'uri_hash', 'expired before the grace', dead('expires_at')),
  rule('device_authorizations', 'device_code_hash', 'expired before the grace', dead('expires_at')),
  rule('outbox', 'id', 'delivered before the retention', (eb, cut) => eb('sent_at', '<', cut.outbox)),
  // The sender gives up on a mail 24 h after it was created; the retention is at least a day.
  rule('outbox', 'id', 'never delivered, created before the retention (abandoned)', (eb, cut) =>
    eb.and([eb('sent_at', 'is', null), eb('created_at', '<', cut.outbox), unlocked(eb, cut)]),
  ),
  // Settled webhook deliveries (their log) go with the mail: `next_attempt_at` is the last attempt's time.
  rule('webhook_deliveries', 'id', 'delivered or failed, last tried before the retention', (eb, cut) =>
    eb.and([eb('status', 'in', ['delivered', 'failed']), eb('next_attempt_at', '<', cut.outbox)]),
  ),
  rule('logout_deliveries', 'id', 'delivered or failed, last tried before the retention', (eb, cut) =>
    eb.and([eb('status', 'in', ['delivered', 'failed']), eb('next_attempt_at', '<', cut.outbox)]),
  ),
  rule('events', 'id', 'older than the retention', (eb, cut) => eb('at', '<', cut.events ?? 0), (cut) => cut.events === null),
];

// Two 32-bit keys ('gate', 'purg'): a key space apart from the single 64-bit key of Kysely's migrator.
const LOCK_KEYS = sql`${sql.lit(0x67617465)}, ${sql.lit(0x70757267)}`;

/**
 * Runs `fn` while holding the purge lock, on one connection it is given. On PostgreSQL that is a
 * session-level `pg_try_advisory_lock` (released at the end, or by the server if the connection
 * dies): when another instance holds it, `fn` is not run and the answer is null. SQLite has one
 * writer at a time anyway: `fn` simply runs.
 */
export async function withPurgeLock<T>(db: Kysely<Database>, dialect: Dialect, fn: (db: Kysely<Database>) => Promise<T>): Promise<T | null> {
  if (dialect !== 'postgres') return fn(db);
  return db.connection().execute(async (conn) => {
    const { rows } = await sql<{ locked: boolean }>`select pg_try_advisory_lock(${LOCK_KEYS}) as locked`.execute(conn);
    if (!rows[0]?.locked) return null;
    try {
      return await fn(conn);
    } finally {
      await sql`select pg_advisory_unlock(${LOCK_KEYS})`.execute(conn);
    }
  });
}
