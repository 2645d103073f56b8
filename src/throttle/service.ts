import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { Redis } from 'ioredis';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import type { Clock } from '../shared/time.js';
import { deleteCounter, findCounter, incrementCounter, lockCounter, saveCounter } from '../storage/repos/throttle.js';
import { normalizeEmail } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';

/**
 * Throttling (CONTRACT §5.3, §14.3, §14.19; SECURITY.md items 63–67):
 * - per-IP: IP_AUTH_PER_MINUTE requests per fixed minute window, counted in memory, or in Redis when
 *   REDIS_URL is set (shared by every process). If Redis is unreachable the limiter falls back to the
 *   in-process counters (fail-soft: still limited per process) and logs a warning;
 * - per account: failed logins keyed by the normalised email (whether or not an account exists),
 *   in the database: LOGIN_MAX_FAILURES within LOGIN_LOCK_SECONDS lock the address for LOGIN_LOCK_SECONDS;
 * - per mailbox: MAIL_PER_HOUR mails per address and kind, MAIL_INTERVAL_SECONDS apart; a refused
 *   request does not count.
 */

export type MailKind = 'verify' | 'magic_link' | 'reset';

const rateLimited = (retryAfter: number, detail: string) =>
  new AppError('rate_limited', { extra: { retry_after: Math.max(1, Math.ceil(retryAfter)) }, detail });

export class Throttle {
  private readonly memory = new Map<string, { window: number; count: number }>();
  private lastSweep = 0;
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

  /** A generic fixed-window limit (memory or Redis), for other per-IP limits (e.g. legal views). */
  async hitKey(key: string, limit: number, windowSeconds: number): Promise<void> {
    const now = this.clock.now();
    const window = Math.floor(now / windowSeconds);
    const retryAfter = (window + 1) * windowSeconds - now;
    let count: number | null = null;
    if (this.redis) {
      try {
        const redisKey = `gatehouse:rl:${key}:${windowSeconds}:${window}`;
        const result = await this.redis.multi().incr(redisKey).expire(redisKey, windowSeconds + 1).exec();
        const value = result?.[0]?.[1];
        if (typeof value === 'number') count = value;
      } catch (error) {
        if (!this.redisWarned) this.log.warn({ err: error }, 'redis unavailable: per-IP limits fall back to in-process counters');
        this.redisWarned = true;
      }
    }
    if (count === null) count = this.memoryHit(`${key}:${windowSeconds}`, window, now);
    if (count > limit) throw rateLimited(retryAfter, `limit ${limit}/${windowSeconds}s for ${key.split(':')[0]}`);
  }

  private memoryHit(key: string, window: number, now: number): number {
    if (now - this.lastSweep > 60) {
      for (const [k, v] of this.memory) if (v.window < window - 1) this.memory.delete(k);
      this.lastSweep = now;
    }
    const entry = this.memory.get(key);
    if (!entry || entry.window !== window) {
      this.memory.set(key, { window, count: 1 });
      return 1;
    }
    entry.count += 1;
    return entry.count;
  }

  // Account lockout --------------------------------------------------------------------------------

  private loginKey = (email: string) => `login:${normalizeEmail(email)}`;

  /** Throws 429 while the address is locked (checked before the password is looked at). */
  async assertLoginAllowed(email: string): Promise<void> {
    const counter = await findCounter(this.db, this.loginKey(email));
    const now = this.clock.now();
    if (counter?.lockedUntil && counter.lockedUntil > now) throw rateLimited(counter.lockedUntil - now, 'account locked');
  }

  /** Records a failed login; returns true when this failure locked the address. */
  async recordLoginFailure(db: Kysely<Database>, email: string): Promise<boolean> {
    const { loginMaxFailures, loginLockSeconds } = this.config.throttle;
    const now = this.clock.now();
    const key = this.loginKey(email);
    const counter = await incrementCounter(db, key, now, loginLockSeconds);
    if (counter.count >= loginMaxFailures && !(counter.lockedUntil && counter.lockedUntil > now)) {
      await lockCounter(db, key, now + loginLockSeconds);
      return true;
    }
    return false;
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
