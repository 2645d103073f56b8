import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { Clock } from '../shared/time.js';
import { deleteCounter, findCounter, lockCounterAtCount, releaseCounterSlot, reserveCounterSlot, saveCounter } from '../storage/repos/throttle.js';
import { normalizeEmail } from '../storage/repos/users.js';
import { recordFirstSighting } from '../storage/repos/seen-once.js';
import { decideInRedis, MemoryWindows, type WindowDecision, type WindowRequest } from './sliding-window.js';
import type { Database } from '../storage/schema.js';

/**
 * Throttling (docs/reference/rest-api.md#throttling, docs/security/checklist.md#brute-force-and-rate-limits):
 * - per-IP: at most IP_AUTH_PER_MINUTE requests in any 60 seconds (a sliding window, see
 *   sliding-window.ts), counted in memory, or in Redis when REDIS_URL is set (shared by every process).
 *   If Redis is unreachable the limiter falls back to the in-process counters (fail-soft: still limited
 *   per process) and logs a warning;
 * - credential guessing per IP (admin token, developer keys, client secrets): `assertUnderLimit` before
 *   the credential is looked at, `hitKey` after a wrong one. Once a key is at its limit every attempt
 *   is refused until its oldest failure leaves the window, the right credential included: a limit that only counted
 *   failures would still answer a right guess, so guessing would go on at full speed;
 * - per account: password evaluations keyed by the normalised email (whether or not an account
 *   exists), in the database: each one reserves a slot atomically BEFORE the password is hashed, so at
 *   most LOGIN_MAX_FAILURES are evaluated per window, concurrent requests and other processes included;
 *   the failure that uses up the budget locks the address for LOGIN_LOCK_SECONDS;
 * - per mailbox: MAIL_PER_HOUR mails per address and kind, MAIL_INTERVAL_SECONDS apart; a refused
 *   request does not count.
 */

export type MailKind = 'verify' | 'magic_link' | 'reset' | 'email_change';

/** A reserved password evaluation (`reserveLoginAttempt`): its counter key, its slot number (1…LOGIN_MAX_FAILURES) and the window it was taken in. */
export interface LoginAttempt {
  key: string;
  slot: number;
  windowStart: number;
}

const rateLimited = (retryAfter: number, detail: string) =>
  new AppError('rate_limited', { extra: { retry_after: Math.max(1, Math.ceil(retryAfter)) }, detail });

export class Throttle {
  private readonly memory = new MemoryWindows();
  private redisWarned = false;

  constructor(
    private readonly db: Kysely<Database>,
    private readonly config: ResolvedConfig,
    private readonly clock: Clock,
    private readonly redis: Redis | null,
    private readonly log: FastifyInstance['log'],
  ) {}

  /**
   * Counts one auth request from the client's IP (every POST under /v1/auth, /oauth/idp/exchange|resume
   * and the hosted sign-in forms). Over IP_AUTH_PER_MINUTE → 429 rate_limited with retry_after.
   */
  async hitIp(request: FastifyRequest): Promise<void> {
    await this.hitKey(`ip:${request.ip}`, this.config.throttle.ipAuthPerMinute, 60);
  }

  /**
   * Counts one event for `key`: at most `limit` in any `windowSeconds` (sliding window, in Redis when
   * configured, else in memory). Over the limit → 429 rate_limited with retry_after, not counted.
   */
  async hitKey(key: string, limit: number, windowSeconds: number): Promise<void> {
    const decision = await this.decide({ key, limit, windowSeconds, now: this.clock.now(), record: true });
    if (!decision.allowed) throw rateLimited(decision.retryAfter, `limit ${limit}/${windowSeconds}s for ${key.split(':')[0]}`);
  }

  /**
   * Refuses (429 rate_limited, retry_after = until the oldest counted event leaves the window) while
   * `key` holds `limit` events of `hitKey` within the last `windowSeconds`; counts nothing. Call it
   * before a credential is evaluated and `hitKey` after a wrong one: then a key at its limit is refused
   * even with the right credential. (Requests already past this check when the limit is reached still
   * finish; `hitKey` answers their failures with 429 too.)
   */
  async assertUnderLimit(key: string, limit: number, windowSeconds: number): Promise<void> {
    const request = { key, limit, windowSeconds, now: this.clock.now(), record: false };
    // In-process events too: they hold the failures counted while Redis was unreachable.
    const local = this.memory.decide(request);
    // Without Redis that is already the answer: every client-authenticated grant passes here, so it is not worked out twice.
    const decision = local.allowed && this.redis ? await this.decide(request) : local;
    if (!decision.allowed) throw rateLimited(decision.retryAfter, `over ${limit}/${windowSeconds}s for ${key.split(':')[0]}`);
  }

  /** Redis when configured and reachable (every process shares it); otherwise this process's memory (fail-soft). */
  private async decide(request: WindowRequest): Promise<WindowDecision> {
    if (this.redis) {
      try {
        return await decideInRedis(this.redis, request);
      } catch (error) {
        if (!this.redisWarned) this.log.warn({ err: error }, 'redis unavailable: per-IP limits fall back to in-process counters');
        this.redisWarned = true;
      }
    }
    return this.memory.decide(request);
  }

  /**
   * Records `key` for `ttlSeconds`; true only the first time, across every process (DPoP proof `jti`s):
   * in Redis (SET NX) when configured, otherwise, or while Redis is unreachable, in the database. Never
   * in process memory: a replay sent to another process must be seen.
   */
  async firstSighting(key: string, ttlSeconds: number): Promise<boolean> {
    if (this.redis) {
      try {
        return (await this.redis.set(`seen:${key}`, '1', 'EX', ttlSeconds, 'NX')) === 'OK';
      } catch (error) {
        if (!this.redisWarned) this.log.warn({ err: error }, 'redis unavailable: replay checks fall back to the database');
        this.redisWarned = true;
      }
    }
    const now = this.clock.now();
    return recordFirstSighting(this.db, key, now, now + ttlSeconds);
  }

  // Account lockout --------------------------------------------------------------------------------

  private loginKey = (email: string) => `login:${normalizeEmail(email)}`;

  /**
   * Reserves one password evaluation for the address, atomically in the database and BEFORE the
   * password is hashed (call it outside any transaction, so other requests and processes see it at
   * once). Each window of LOGIN_LOCK_SECONDS (from its first attempt) has LOGIN_MAX_FAILURES slots; a
   * failure keeps its slot, a correct password clears the counter (`clearLoginFailures`). No slot
   * left, or the address locked → 429 rate_limited with retry_after, and nothing is hashed: this is
   * what keeps concurrent requests from evaluating more than LOGIN_MAX_FAILURES guesses.
   */
  async reserveLoginAttempt(email: string): Promise<LoginAttempt> {
    return this.reserveAttempt(this.loginKey(email));
  }

  private factorKey = (userId: string) => `mfa:${userId}`;

  /**
   * Second-factor codes (TOTP, recovery codes) are guessed like passwords and locked like them: the
   * same budget and lock, counted per user (the first factor already named the user).
   */
  async reserveFactorAttempt(userId: string): Promise<LoginAttempt> {
    return this.reserveAttempt(this.factorKey(userId));
  }

  async clearFactorFailures(db: Kysely<Database>, userId: string): Promise<void> {
    await deleteCounter(db, this.factorKey(userId));
  }

  private async reserveAttempt(key: string): Promise<LoginAttempt> {
    const { loginMaxFailures, loginLockSeconds } = this.config.throttle;
    const now = this.clock.now();
    const taken = await reserveCounterSlot(this.db, key, now, loginLockSeconds, loginMaxFailures);
    if (taken === null) {
      const counter = await findCounter(this.db, key);
      // Locked: the rest of the lock. Slots all held by attempts still running: if the one holding
      // the last slot fails, it locks the address for LOGIN_LOCK_SECONDS from then.
      const retryAfter = counter?.lockedUntil && counter.lockedUntil > now ? counter.lockedUntil - now : loginLockSeconds;
      throw rateLimited(retryAfter, 'account locked or login attempts used up');
    }
    return { key, slot: taken.slot, windowStart: taken.windowStart };
  }

  /**
   * Gives back the slot of an attempt whose password was never evaluated (its turn at argon2 was
   * skipped: its client had left, or it waited over PASSWORD_MAX_WAIT_MS): sign-ins that time out or
   * are refused under load must not use up an address's attempts, and no guess was made. An evaluated
   * attempt never comes here: a failure keeps its slot.
   */
  async releaseLoginAttempt(attempt: LoginAttempt): Promise<void> {
    await releaseCounterSlot(this.db, attempt.key, attempt.windowStart);
  }

  /**
   * The reserved attempt failed: its slot stays used. The failure holding the last slot locks the
   * address for LOGIN_LOCK_SECONDS from now (unless the counter was cleared meanwhile by a correct
   * password). Returns true when this failure locked the address.
   */
  async recordLoginFailure(db: Kysely<Database>, attempt: LoginAttempt): Promise<boolean> {
    const { loginMaxFailures, loginLockSeconds } = this.config.throttle;
    if (attempt.slot < loginMaxFailures) return false;
    return lockCounterAtCount(db, attempt.key, loginMaxFailures, this.clock.now() + loginLockSeconds);
  }

  async clearLoginFailures(db: Kysely<Database>, email: string): Promise<void> {
    await deleteCounter(db, this.loginKey(email));
  }

  // Mail limits ------------------------------------------------------------------------------------

  /**
   * Counts one mail of `kind` to `address` (call inside the transaction that enqueues it, so a
   * rolled-back request does not count). Over the limit → 429 rate_limited with retry_after, and
   * nothing is counted. Applies whether or not the address has an account.
   */
  async hitMail(db: Kysely<Database>, kind: MailKind, address: string): Promise<void> {
    const { mailPerHour, mailIntervalSeconds } = this.config.throttle;
    const now = this.clock.now();
    const key = `mail:${kind}:${normalizeEmail(address)}`;
    const counter = await findCounter(db, key);
    if (counter) {
      const sinceLast = now - counter.updatedAt;
      if (mailIntervalSeconds > 0 && sinceLast < mailIntervalSeconds) throw rateLimited(mailIntervalSeconds - sinceLast, `mail interval (${kind})`);
      const windowOpen = counter.windowStart + 3600 > now;
      if (windowOpen && counter.count >= mailPerHour) throw rateLimited(counter.windowStart + 3600 - now, `mail hourly limit (${kind})`);
      await saveCounter(db, windowOpen ? { ...counter, count: counter.count + 1, updatedAt: now } : { key, count: 1, windowStart: now, lockedUntil: null, updatedAt: now });
      return;
    }
    await saveCounter(db, { key, count: 1, windowStart: now, lockedUntil: null, updatedAt: now });
  }

  async close(): Promise<void> {
    if (this.redis) this.redis.disconnect();
  }
}
