import { type Kysely, sql } from 'kysely';
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
  | 'outbox'
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

const deleted = (result: { numDeletedRows: bigint }) => Number(result.numDeletedRows);

/**
 * Every purge rule, in the order a run applies them. Refresh tokens go before grants: a grant is
 * deleted only once no refresh token references it, so its ON DELETE CASCADE never deletes an
 * unbounded number of token rows in one statement.
 */
export const PURGE_STEPS: readonly PurgeStep[] = [
  {
    table: 'authorization_codes',
    rule: 'expired (and consumed, if at all) before the grace',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('authorization_codes')
          .where(
            'code_hash',
            'in',
            db
              .selectFrom('authorization_codes')
              .select('code_hash')
              .where('expires_at', '<', cut.dead)
              .where((eb) => eb.or([eb('consumed_at', 'is', null), eb('consumed_at', '<', cut.dead)]))
              .limit(limit),
          )
          .executeTakeFirst(),
      ),
  },
  {
    // A refresh token never outlives its grant (expires_at = min(token TTL, grant expiry)).
    table: 'refresh_tokens',
    rule: 'expired before the grace',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('refresh_tokens')
          .where('token_hash', 'in', db.selectFrom('refresh_tokens').select('token_hash').where('expires_at', '<', cut.dead).limit(limit))
          .executeTakeFirst(),
      ),
  },
  {
    table: 'refresh_tokens',
    rule: 'of a grant revoked before the grace',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('refresh_tokens')
          .where(
            'token_hash',
            'in',
            db
              .selectFrom('grants as g')
              .innerJoin('refresh_tokens as rt', 'rt.grant_id', 'g.id')
              .select('rt.token_hash')
              .where('g.revoked_at', '<', cut.dead)
              .limit(limit),
          )
          .executeTakeFirst(),
      ),
  },
  {
    table: 'refresh_tokens',
    rule: 'of a grant expired before the grace',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('refresh_tokens')
          .where(
            'token_hash',
            'in',
            db
              .selectFrom('grants as g')
              .innerJoin('refresh_tokens as rt', 'rt.grant_id', 'g.id')
              .select('rt.token_hash')
              .where('g.expires_at', '<', cut.dead)
              .limit(limit),
          )
          .executeTakeFirst(),
      ),
  },
  {
    table: 'grants',
    rule: 'revoked before the grace, with no refresh token left',
    deleteBatch: async (db, cut, limit) => deleteGrants(db, 'revoked_at', cut.dead, limit),
  },
  {
    table: 'grants',
    rule: 'expired before the grace, with no refresh token left',
    deleteBatch: async (db, cut, limit) => deleteGrants(db, 'expires_at', cut.dead, limit),
  },
  {
    table: 'one_time_tokens',
    rule: 'expired before the grace',
    deleteBatch: async (db, cut, limit) => deleteOneTimeTokens(db, 'expires_at', cut.dead, limit),
  },
  {
    table: 'one_time_tokens',
    rule: 'consumed before the grace',
    deleteBatch: async (db, cut, limit) => deleteOneTimeTokens(db, 'consumed_at', cut.dead, limit),
  },
  {
    table: 'browser_sessions',
    rule: 'expired before the grace',
    deleteBatch: async (db, cut, limit) => deleteBrowserSessions(db, 'expires_at', cut.dead, limit),
  },
  {
    table: 'browser_sessions',
    rule: 'revoked before the grace',
    deleteBatch: async (db, cut, limit) => deleteBrowserSessions(db, 'revoked_at', cut.dead, limit),
  },
  {
    table: 'throttle_counters',
    rule: 'untouched for longer than every window, and not locked',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('throttle_counters')
          .where(
            'key',
            'in',
            db
              .selectFrom('throttle_counters')
              .select('key')
              .where('updated_at', '<', cut.throttle)
              .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', cut.now)]))
              .limit(limit),
          )
          .executeTakeFirst(),
      ),
  },
  {
    table: 'outbox',
    rule: 'delivered before the retention',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('outbox')
          .where('id', 'in', db.selectFrom('outbox').select('id').where('sent_at', '<', cut.outbox).limit(limit))
          .executeTakeFirst(),
      ),
  },
  {
    // The sender gives up on a mail 24 h after it was created; the retention is at least a day.
    table: 'outbox',
    rule: 'never delivered, created before the retention (abandoned)',
    deleteBatch: async (db, cut, limit) =>
      deleted(
        await db
          .deleteFrom('outbox')
          .where(
            'id',
            'in',
            db
              .selectFrom('outbox')
              .select('id')
              .where('sent_at', 'is', null)
              .where('created_at', '<', cut.outbox)
              .where((eb) => eb.or([eb('locked_until', 'is', null), eb('locked_until', '<=', cut.now)]))
              .limit(limit),
          )
          .executeTakeFirst(),
      ),
  },
  {
    table: 'events',
    rule: 'older than the retention',
    deleteBatch: async (db, cut, limit) => {
      if (cut.events === null) return 0;
      return deleted(
        await db
          .deleteFrom('events')
          .where('id', 'in', db.selectFrom('events').select('id').where('at', '<', cut.events).limit(limit))
          .executeTakeFirst(),
      );
    },
  },
];

async function deleteGrants(db: Kysely<Database>, column: 'revoked_at' | 'expires_at', before: number, limit: number): Promise<number> {
  return deleted(
    await db
      .deleteFrom('grants')
      .where(
        'id',
        'in',
        db
          .selectFrom('grants as g')
          .select('g.id')
          .where(`g.${column}`, '<', before)
          .where(({ not, exists, selectFrom }) => not(exists(selectFrom('refresh_tokens as rt').select('rt.token_hash').whereRef('rt.grant_id', '=', 'g.id'))))
          .limit(limit),
      )
      .executeTakeFirst(),
  );
}

async function deleteOneTimeTokens(db: Kysely<Database>, column: 'expires_at' | 'consumed_at', before: number, limit: number): Promise<number> {
  return deleted(
    await db
      .deleteFrom('one_time_tokens')
      .where('id', 'in', db.selectFrom('one_time_tokens').select('id').where(column, '<', before).limit(limit))
      .executeTakeFirst(),
  );
}

async function deleteBrowserSessions(db: Kysely<Database>, column: 'expires_at' | 'revoked_at', before: number, limit: number): Promise<number> {
  return deleted(
    await db
      .deleteFrom('browser_sessions')
      .where('id_hash', 'in', db.selectFrom('browser_sessions').select('id_hash').where(column, '<', before).limit(limit))
      .executeTakeFirst(),
  );
}

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
