import type { LightMyRequestResponse } from 'fastify';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { afterEach, describe, expect, it } from 'vitest';
import { epochSeconds } from '../../src/shared/time.js';
import type { Database } from '../../src/storage/schema.js';
import { buildTestApp, FrozenClock, TEST_DIALECT, type TestApp } from '../helpers/app.js';
import { eventually, holdThreadPool } from '../helpers/concurrency.js';
import { makeApp, makeUser } from '../helpers/factories.js';

/**
 * Issue "Security hardening", item 4: at most LOGIN_MAX_FAILURES passwords are evaluated per window
 * for an address, concurrent requests included (docs/reference/rest-api.md#throttling). Observed from the
 * outside only: answers (401 = evaluated and wrong, 429 = refused unhashed) and recorded events.
 * Time only moves through a frozen clock.
 */

const apps: TestApp[] = [];
afterEach(async () => {
  for (const t of apps.splice(0)) await t.close();
});

async function frozenApp(): Promise<TestApp> {
  // The per-IP limit is not under test here: every request comes from one address.
  // No bound on the wait for argon2 (PASSWORD_MAX_WAIT_MS=0): checks wait while the tests hold the
  // thread pool, for as long as a slow machine takes to get there, and must still be evaluated.
  const t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', PASSWORD_MAX_WAIT_MS: '0' }, clock: new FrozenClock(epochSeconds()) });
  await warmPool(t.db);
  apps.push(t);
  return t;
}

/** Opens every PostgreSQL pool connection now, so no request needs a new one while the thread pool is held. */
async function warmPool(db: Kysely<Database>): Promise<void> {
  if (TEST_DIALECT === 'postgres') await Promise.all(Array.from({ length: 10 }, () => sql`select pg_sleep(0.05)`.execute(db)));
}

const timeout = (ms: number) => new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms));

const tally = (responses: LightMyRequestResponse[]) => {
  const counts: Record<number, number> = {};
  for (const r of responses) counts[r.statusCode] = (counts[r.statusCode] ?? 0) + 1;
  return counts;
};

async function eventCount(db: Kysely<Database>, type: string): Promise<number> {
  return (await db.selectFrom('events').select('id').where('type', '=', type).execute()).length;
}

describe('lockout under concurrency', () => {
  it('28 concurrent wrong passwords: exactly 5 are evaluated (401), 23 are refused (429); identical for a known and an unknown address', async () => {
    const t = await frozenApp();
    const client = await makeApp(t.db);
    const user = await makeUser(t.app, { email: 'race@example.com', password: 'the right passphrase' });
    const max = t.config.throttle.loginMaxFailures;
    const lock = t.config.throttle.loginLockSeconds;
    const login = (email: string, password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password, client_id: client.id } });
    const burst = (email: string) => Promise.all(Array.from({ length: 28 }, (_, i) => login(email, `wrong password ${i}`)));

    const known = await burst(user.email);
    expect(tally(known)).toEqual({ 401: max, 429: 28 - max });
    expect(await eventCount(t.db, 'user.login_failed')).toBe(max);
    expect(await eventCount(t.db, 'user.locked')).toBe(1);

    const unknown = await burst('nobody@example.com');
    expect(tally(unknown)).toEqual({ 401: max, 429: 28 - max });
    expect(await eventCount(t.db, 'user.login_failed')).toBe(2 * max);
    // No enumeration: the same answers, byte for byte, for the known and the unknown address.
    const bodies = (responses: LightMyRequestResponse[]) => [...new Set(responses.map((r) => `${r.statusCode} ${r.headers['retry-after'] ?? '-'} ${r.body}`))].sort();
    expect(bodies(unknown)).toEqual(bodies(known));
    for (const r of known.filter((x) => x.statusCode === 429)) {
      expect(r.json()).toMatchObject({ code: 'rate_limited', retry_after: lock });
    }

    // The lock lasts LOGIN_LOCK_SECONDS from the failure that set it, the right password included; then it works.
    t.clock.advance(lock - 1);
    const stillLocked = await login(user.email, user.password);
    expect(stillLocked.statusCode).toBe(429);
    expect(stillLocked.json().retry_after).toBe(1);
    t.clock.advance(1);
    expect((await login(user.email, user.password)).statusCode).toBe(200);
  });

  it('a right password sent while concurrent wrong ones hold the budget is refused without being hashed', async () => {
    const t = await frozenApp();
    const client = await makeApp(t.db);
    const user = await makeUser(t.app, { email: 'burst@example.com', password: 'the right passphrase' });
    const max = t.config.throttle.loginMaxFailures;
    const login = (password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password, client_id: client.id } });
    const reserved = async () => {
      const row = await t.db.selectFrom('throttle_counters').select('count').where('key', '=', `login:${user.email}`).executeTakeFirst();
      return (row?.count ?? 0) >= max;
    };

    const release = holdThreadPool();
    let right: LightMyRequestResponse | undefined;
    let answeredWhileHeld = false;
    let wrong: LightMyRequestResponse[] = [];
    try {
      const wrongPending = Array.from({ length: max }, (_, i) => login(`wrong password ${i}`));
      await eventually(reserved); // with the old code nothing is counted before hashing: this just times out
      const rightPending = login(user.password);
      answeredWhileHeld = (await Promise.race([rightPending, timeout(5000)])) !== 'pending';
      await release();
      right = await rightPending;
      wrong = await Promise.all(wrongPending);
    } finally {
      await release();
    }
    expect(right!.statusCode, right!.body.slice(0, 80)).toBe(429);
    expect(right!.json().code).toBe('rate_limited');
    expect(answeredWhileHeld).toBe(true);
    expect(tally(wrong)).toEqual({ 401: max });
    expect(await eventCount(t.db, 'user.login_succeeded')).toBe(0);
    expect(await eventCount(t.db, 'user.login_failed')).toBe(max);
  });

  it('positive control: a burst within the budget is evaluated normally, and a correct password clears the counter', async () => {
    const t = await frozenApp();
    const client = await makeApp(t.db);
    const user = await makeUser(t.app, { email: 'within@example.com', password: 'the right passphrase' });
    const max = t.config.throttle.loginMaxFailures;
    const login = (password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password, client_id: client.id } });

    const release = holdThreadPool();
    let wrong: LightMyRequestResponse[] = [];
    let right: LightMyRequestResponse;
    try {
      const wrongPending = Array.from({ length: max - 1 }, (_, i) => login(`wrong password ${i}`));
      const rightPending = login(user.password);
      // All five hold a slot before any of them is hashed.
      await eventually(async () => {
        const row = await t.db.selectFrom('throttle_counters').select('count').where('key', '=', `login:${user.email}`).executeTakeFirst();
        return (row?.count ?? 0) >= max;
      });
      await release();
      [wrong, right] = await Promise.all([Promise.all(wrongPending), rightPending]);
    } finally {
      await release();
    }
    expect(tally(wrong)).toEqual({ 401: max - 1 });
    expect(right.statusCode, right.body.slice(0, 80)).toBe(200);

    // After a success the address has its whole budget again: failures 1–5 → 401, the 6th → 429.
    const sequential: number[] = [];
    for (let i = 0; i <= max; i++) sequential.push((await login(`later wrong ${i}`)).statusCode);
    expect(sequential).toEqual([...Array(max).fill(401), 429]);
  });

  it('failures are counted over LOGIN_LOCK_SECONDS: an old window does not add up with a new one', async () => {
    const t = await frozenApp();
    const client = await makeApp(t.db);
    const max = t.config.throttle.loginMaxFailures;
    const login = (password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: 'Window@Example.com ', password, client_id: client.id } });
    for (let i = 0; i < max - 1; i++) expect((await login(`wrong ${i} password`)).statusCode).toBe(401);
    t.clock.advance(t.config.throttle.loginLockSeconds);
    for (let i = 0; i < max; i++) expect((await login(`wrong again ${i}`)).statusCode).toBe(401);
    // Keyed by the normalised address: another spelling shares the lock.
    const other = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: 'window@example.com', password: 'anything 123', client_id: client.id } });
    expect(other.statusCode).toBe(429);
  });

  it('a disabled user: the correct password answers user_disabled and does not use up the budget', async () => {
    const t = await frozenApp();
    const client = await makeApp(t.db);
    const user = await makeUser(t.app, { email: 'off@example.com', password: 'the right passphrase', status: 'disabled' });
    const max = t.config.throttle.loginMaxFailures;
    const login = (password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password, client_id: client.id } });
    for (let i = 0; i < max + 2; i++) expect((await login(user.password)).json().code).toBe('user_disabled');
    for (let i = 0; i < max; i++) expect((await login(`wrong ${i} password`)).statusCode).toBe(401);
    expect((await login(user.password)).statusCode).toBe(429);
  });
});
