import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import type { Kysely } from 'kysely';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import type { ResolvedConfig } from '../../src/config.js';
import { epochSeconds } from '../../src/shared/time.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import type { Database } from '../../src/storage/schema.js';
import { FrozenClock, createTestStorage, testConfig } from '../helpers/app.js';
import { eventually, holdThreadPool } from '../helpers/concurrency.js';
import { makeApp, makeUser } from '../helpers/factories.js';

/**
 * Issue "Security hardening", item 4, across processes: two Gatehouse instances (two `buildApp`s,
 * each with its own connection pool and in-process state) on one PostgreSQL database share one
 * budget of LOGIN_MAX_FAILURES evaluated passwords per address. The reservation lives in the database.
 */

const timeout = (ms: number) => new Promise<'pending'>((resolve) => setTimeout(() => resolve('pending'), ms));

const tally = (responses: LightMyRequestResponse[]) => {
  const counts: Record<number, number> = {};
  for (const r of responses) counts[r.statusCode] = (counts[r.statusCode] ?? 0) + 1;
  return counts;
};

describe('lockout across two instances on one PostgreSQL database', () => {
  let a: FastifyInstance;
  let b: FastifyInstance;
  let storageA: Storage;
  let storageB: Storage;
  let drop: () => Promise<void>;
  let db: Kysely<Database>;
  let config: ResolvedConfig;
  let clientId: string;

  beforeAll(async () => {
    const created = await createTestStorage();
    storageA = created.storage;
    drop = created.drop;
    storageB = createStorage(created.url);
    // No bound on the wait for argon2 (PASSWORD_MAX_WAIT_MS=0): checks wait while the test holds the
    // thread pool, for as long as a slow machine takes to get there, and must still be evaluated.
    config = testConfig({ IP_AUTH_PER_MINUTE: '100000', PASSWORD_MAX_WAIT_MS: '0' });
    const clockA = new FrozenClock(epochSeconds());
    const clockB = new FrozenClock(clockA.now());
    a = await buildApp(config, { storage: storageA, clock: clockA, logStream: false });
    b = await buildApp(config, { storage: storageB, clock: clockB, logStream: false });
    await a.ready();
    await b.ready();
    db = storageA.db;
    // Open every pool connection now: none is needed while the thread pool is held.
    for (const storage of [storageA, storageB]) await Promise.all(Array.from({ length: 10 }, () => sql`select pg_sleep(0.05)`.execute(storage.db)));
    clientId = (await makeApp(db)).id;
  });
  afterAll(async () => {
    await a?.close();
    await b?.close();
    await storageA?.close();
    await storageB?.close();
    await drop?.();
  });

  const login = (app: FastifyInstance, email: string, password: string) => app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password, client_id: clientId } });
  const failedEvents = async () => (await db.selectFrom('events').select('id').where('type', '=', 'user.login_failed').execute()).length;

  it('28 concurrent wrong passwords split over both instances: 5 evaluated (401) in all, 23 refused (429)', async () => {
    const user = await makeUser({ db }, { email: 'two-instances@example.com', password: 'the right passphrase' });
    const before = await failedEvents();
    const responses = await Promise.all(Array.from({ length: 28 }, (_, i) => login(i % 2 ? b : a, user.email, `wrong password ${i}`)));
    expect(tally(responses)).toEqual({ 401: config.throttle.loginMaxFailures, 429: 28 - config.throttle.loginMaxFailures });
    expect((await failedEvents()) - before).toBe(config.throttle.loginMaxFailures);
    // Both instances see the lock, with the right password too.
    expect((await login(a, user.email, user.password)).statusCode).toBe(429);
    expect((await login(b, user.email, user.password)).statusCode).toBe(429);
  });

  it('a right password at one instance is refused, unhashed, while wrong ones at the other hold the budget', async () => {
    const user = await makeUser({ db }, { email: 'held-elsewhere@example.com', password: 'the right passphrase' });
    const max = config.throttle.loginMaxFailures;
    const reserved = async () => {
      const row = await db.selectFrom('throttle_counters').select('count').where('key', '=', `login:${user.email}`).executeTakeFirst();
      return (row?.count ?? 0) >= max;
    };
    const release = holdThreadPool();
    let right: LightMyRequestResponse | undefined;
    let answeredWhileHeld = false;
    let wrong: LightMyRequestResponse[] = [];
    try {
      const wrongPending = Array.from({ length: max }, (_, i) => login(a, user.email, `wrong password ${i}`));
      await eventually(reserved);
      const rightPending = login(b, user.email, user.password);
      answeredWhileHeld = (await Promise.race([rightPending, timeout(5000)])) !== 'pending';
      await release();
      right = await rightPending;
      wrong = await Promise.all(wrongPending);
    } finally {
      await release();
    }
    expect(right!.statusCode, right!.body.slice(0, 80)).toBe(429);
    expect(answeredWhileHeld).toBe(true);
    expect(tally(wrong)).toEqual({ 401: max });
  });

  it('positive control: without a lock, either instance signs the user in and clears the counter for both', async () => {
    const user = await makeUser({ db }, { email: 'fine@example.com', password: 'the right passphrase' });
    const max = config.throttle.loginMaxFailures;
    for (let i = 0; i < max - 1; i++) expect((await login(a, user.email, `wrong ${i} password`)).statusCode).toBe(401);
    expect((await login(b, user.email, user.password)).statusCode).toBe(200);
    for (let i = 0; i < max; i++) expect((await login(i % 2 ? a : b, user.email, `again wrong ${i}`)).statusCode).toBe(401);
    expect((await login(a, user.email, user.password)).statusCode).toBe(429);
  });
});
