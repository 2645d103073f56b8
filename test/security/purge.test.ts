import { sql } from 'kysely';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { parseConfig } from '../../src/config.js';
import { PURGE_STEPS, type PurgeTable, withPurgeLock } from '../../src/storage/repos/purge.js';
import { saveCounter } from '../../src/storage/repos/throttle.js';
import type { Database } from '../../src/storage/schema.js';
import { startReceiver } from '../helpers/webhook-receiver.js';
import { buildTestApp, TEST_DIALECT, TEST_SECRET_KEY, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { authorizeAndGetCode, Browser, exchangeCode, makeClient, PASSWORD, refresh, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { childEnv, freshDatabaseUrl, runCli } from '../helpers/processes.js';

/**
 * The purge of expired rows (SECURITY hardening item 6): `app.purge.runOnce()` deletes, in batches,
 * what nobody can use any more — codes, refresh tokens, grants, one-time tokens, browser sessions,
 * throttle counters, delivered mail, events past EVENT_RETENTION_DAYS — and nothing live: a live
 * refresh token still refreshes, a live session still works, a fresh magic link still signs in, a
 * code redeemed within the grace is still recognised as a replay, recent events stay.
 */

const DAY = 86400;
const BASE_ENV = { PURGE_INTERVAL_SECONDS: '0', IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0' };

/** The column that says when a row of each purged table was written (to split "old" from "recent"). */
const WRITTEN_AT: Record<PurgeTable, string> = {
  authorization_codes: 'created_at',
  refresh_tokens: 'created_at',
  grants: 'created_at',
  one_time_tokens: 'created_at',
  browser_sessions: 'created_at',
  throttle_counters: 'updated_at',
  seen_once: 'expires_at',
  pushed_authorization_requests: 'created_at',
  device_authorizations: 'created_at',
  outbox: 'created_at',
  webhook_deliveries: 'created_at',
  logout_deliveries: 'created_at',
  events: 'at',
};
const TABLES = Object.keys(WRITTEN_AT) as PurgeTable[];

type Split = Record<PurgeTable, { old: number; recent: number }>;

/** Rows of every purged table written before / from `boundary`. */
async function split(t: TestApp, boundary: number): Promise<Split> {
  const out = {} as Split;
  for (const table of TABLES) {
    const column = WRITTEN_AT[table];
    const rows = await t.db
      .selectFrom(table as keyof Database)
      .select((eb) => [
        eb.fn.countAll<number>().as('total'),
        sql<number>`sum(case when ${sql.ref(column)} < ${boundary} then 1 else 0 end)`.as('old'),
      ])
      .executeTakeFirstOrThrow();
    const total = Number(rows.total);
    const old = Number(rows.old ?? 0);
    out[table] = { old, recent: total - old };
  }
  return out;
}

const post = (t: TestApp, url: string, payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url, payload });

async function userId(t: TestApp, email: string): Promise<string> {
  return (await t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow()).id;
}

async function grantsOf(t: TestApp, email: string) {
  return t.db.selectFrom('grants').select(['id', 'revoked_at']).where('user_id', '=', await userId(t, email)).execute();
}

/** A browser that registered, signed in to `client` through /oauth/authorize and redeemed its code. */
async function hostedSignIn(t: TestApp, client: TestClient) {
  const browser = new Browser(t.app);
  const user = await browser.register();
  const { code, verifier, redirectUri } = await authorizeAndGetCode(browser, client);
  const res = await exchangeCode(t.app, client, code, verifier, redirectUri);
  expect(res.statusCode).toBe(200);
  return { browser, user, code, verifier, redirectUri, tokens: res.json() as { refresh_token: string } };
}

/** A REST registration: a grant with a live refresh token. */
async function restRegister(t: TestApp, client: TestClient) {
  const email = uniqueEmail('rest');
  const res = await post(t, '/v1/auth/register', { email, password: PASSWORD, name: 'Rest User', client_id: client.app.id });
  expect(res.statusCode).toBe(201);
  return { email, refreshToken: res.json().refresh_token as string };
}

/** Mail requests that leave a one-time token, an outbox row and a mail counter each (also for unknown addresses). */
async function requestMagicLinks(t: TestApp, client: TestClient, emails: string[]) {
  for (const email of emails) expect((await post(t, '/v1/auth/magic-link/request', { email, client_id: client.app.id })).statusCode).toBe(202);
  await t.app.mailer.drain();
}

/** A pushed authorization request (RFC 9126): a row that lives 60 s. */
async function pushRequest(t: TestApp, client: TestClient) {
  const res = await post(t, '/oauth/par', {
    client_id: client.app.id, response_type: 'code', redirect_uri: client.app.redirectUris[0], code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256',
  });
  expect(res.statusCode).toBe(201);
}

/** A device authorization request (RFC 8628): a row that lives 10 minutes. */
async function startDeviceAuthorization(t: TestApp, client: TestClient) {
  await t.db.updateTable('apps').set({ device_authorization_grant: 1 }).where('id', '=', client.app.id).execute();
  expect((await post(t, '/oauth/device_authorization', { client_id: client.app.id })).statusCode).toBe(200);
}

describe('purge: every table that accumulates rows', () => {
  let t: TestApp;
  afterAll(async () => t?.close());

  it('deletes expired, consumed and revoked rows past the grace, and keeps every live one', async () => {
    // Refresh tokens live an hour here, their family (grant) the default 90 days.
    t = await buildTestApp({ env: { ...BASE_ENV, REFRESH_TOKEN_TTL: '3600' } });
    const client = await makeClient(t);
    // Sign-ins become webhooks to this endpoint; their delivered rows are the log the purge trims.
    const receiver = await startReceiver();
    await t.app.webhooks.create(client.app.id, { url: receiver.url, event_types: [], description: null, enabled: true }, {});
    // Sign-outs become back-channel logout tokens to the same receiver (docs/guides/back-channel-logout.md).
    await t.db.updateTable('apps').set({ backchannel_logout_uri: receiver.url }).where('id', '=', client.app.id).execute();

    // --- Old rows (8 days before the purge) -------------------------------------------------------
    const a = await hostedSignIn(t, client); // a session, a redeemed code, a grant that stays live
    const rotated = await refresh(t.app, client, a.tokens.refresh_token); // first token consumed; both expire in 1 h
    expect(rotated.statusCode).toBe(200);
    const b = await restRegister(t, client);
    expect((await post(t, '/v1/auth/logout', { refresh_token: b.refreshToken })).statusCode).toBe(204); // grant revoked
    expect((await post(t, '/v1/auth/login', { email: b.email, password: 'not the password', client_id: client.app.id })).statusCode).toBe(401);
    await requestMagicLinks(t, client, [a.user.email, uniqueEmail('nobody')]);
    const lockedKey = `login:${uniqueEmail('locked')}`;
    const t0 = t.clock.now();
    // A lock still in force outlives every window: its counter is kept.
    await saveCounter(t.db, { key: lockedKey, count: 5, windowStart: t0, lockedUntil: t0 + 30 * DAY, updatedAt: t0 });
    const keysBefore = await countAll(t.db, 'signing_keys');
    expect(await t.app.throttle.firstSighting('dpop-jti:old', 181)).toBe(true); // a DPoP proof's jti, long expired by the purge
    await pushRequest(t, client);
    await startDeviceAuthorization(t, client);

    await settleDeliveries(t);
    t.clock.advance(8 * DAY); // past every expiry + the 1-day grace, and the 7-day outbox retention
    const boundary = t.clock.now();

    // --- Recent rows (live, or dead within the grace) ---------------------------------------------
    const c = await hostedSignIn(t, client);
    const cRotated = await refresh(t.app, client, c.tokens.refresh_token);
    expect(cRotated.statusCode).toBe(200);
    const cLive = cRotated.json().refresh_token as string;
    const d = await restRegister(t, client);
    expect((await post(t, '/v1/auth/login', { email: d.email, password: 'not the password', client_id: client.app.id })).statusCode).toBe(401);
    await requestMagicLinks(t, client, [d.email]);
    expect(await t.app.throttle.firstSighting('dpop-jti:recent', 181)).toBe(true);
    await pushRequest(t, client);
    await startDeviceAuthorization(t, client);
    const e = await restRegister(t, client);
    expect((await post(t, '/v1/auth/logout', { refresh_token: e.refreshToken })).statusCode).toBe(204); // revoked within the grace
    await settleDeliveries(t);
    await receiver.close();

    const before = await split(t, boundary);
    for (const table of TABLES) expect(before[table].recent, table).toBeGreaterThan(0);
    const grantsOfA = await grantsOf(t, a.user.email);
    const grantsOfB = await grantsOf(t, b.email);
    expect(grantsOfA).toHaveLength(1);
    expect(grantsOfB).toHaveLength(1);

    const counts = await t.app.purge.runOnce();
    const after = await split(t, boundary);

    // Dead rows are gone; what is still live (a's grant, the locked counter) and every old event stay.
    expect(after).toEqual({
      authorization_codes: { old: 0, recent: before.authorization_codes.recent },
      refresh_tokens: { old: 0, recent: before.refresh_tokens.recent },
      grants: { old: 1, recent: before.grants.recent },
      one_time_tokens: { old: 0, recent: before.one_time_tokens.recent },
      browser_sessions: { old: 0, recent: before.browser_sessions.recent },
      throttle_counters: { old: 1, recent: before.throttle_counters.recent },
      seen_once: { old: 0, recent: before.seen_once.recent },
      pushed_authorization_requests: { old: 0, recent: before.pushed_authorization_requests.recent },
      device_authorizations: { old: 0, recent: before.device_authorizations.recent },
      outbox: { old: 0, recent: before.outbox.recent },
      webhook_deliveries: { old: 0, recent: before.webhook_deliveries.recent },
      logout_deliveries: { old: 0, recent: before.logout_deliveries.recent },
      events: { old: before.events.old, recent: before.events.recent },
    });
    expect(await grantsOf(t, a.user.email)).toEqual(grantsOfA);
    expect(await grantsOf(t, b.email)).toEqual([]);
    expect(await countAll(t.db, 'throttle_counters', { key: lockedKey })).toBe(1);
    expect(await countAll(t.db, 'signing_keys')).toBe(keysBefore);
    // The answer counts exactly the rows that went, per table.
    expect(counts).toEqual(Object.fromEntries(TABLES.map((table) => [table, before[table].old - after[table].old])));
    for (const table of ['authorization_codes', 'refresh_tokens', 'grants', 'one_time_tokens', 'browser_sessions', 'throttle_counters', 'seen_once', 'pushed_authorization_requests', 'device_authorizations', 'outbox', 'webhook_deliveries', 'logout_deliveries'] as const) {
      expect(counts![table], table).toBeGreaterThan(0);
    }

    // The counts are logged at info; nothing of the rows themselves.
    const line = t.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'purge finished');
    expect(line).toMatchObject({ level: 30, purged: counts, complete: true });

    // Live things still work after the purge.
    const cNext = await refresh(t.app, client, cLive);
    expect(cNext.statusCode).toBe(200);
    expect((await post(t, '/v1/auth/refresh', { refresh_token: d.refreshToken, client_id: client.app.id })).statusCode).toBe(200);
    const account = await c.browser.get('/account');
    expect(account.statusCode).toBe(200);
    expect(account.body).toContain(c.user.email);
    const mail = (await t.app.mailer.recent()).find((m) => m.to === d.email && m.kind === 'magic_link')!;
    const token = /token=(ml_[A-Za-z0-9_-]+)/.exec(mail.text)![1];
    expect((await post(t, '/v1/auth/magic-link/verify', { token, client_id: client.app.id })).statusCode).toBe(200);

    // A code redeemed within the grace is still known: its replay is refused and revokes its grant.
    const replay = await exchangeCode(t.app, client, c.code, c.verifier, c.redirectUri);
    expect(replay.statusCode).toBe(400);
    expect(replay.json().error).toBe('invalid_grant');
    expect((await refresh(t.app, client, cNext.json().refresh_token)).statusCode).toBe(400);

    // A second run finds nothing more to do.
    const again = await t.app.purge.runOnce();
    expect(Object.values(again!).every((n) => n === 0)).toBe(true);
  });
});

describe('purge: event retention', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    while (apps.length) await apps.pop()!.close();
  });

  it('EVENT_RETENTION_DAYS=1 deletes events older than a day and keeps recent ones', async () => {
    const t = await buildTestApp({ env: { ...BASE_ENV, EVENT_RETENTION_DAYS: '1' } });
    apps.push(t);
    const client = await makeClient(t);
    await restRegister(t, client);
    t.clock.advance(DAY + 60);
    const boundary = t.clock.now();
    await restRegister(t, client);
    const before = await split(t, boundary);
    expect(before.events.old).toBeGreaterThan(0);
    expect(before.events.recent).toBeGreaterThan(0);

    const counts = await t.app.purge.runOnce();
    expect(counts!.events).toBe(before.events.old);
    expect((await split(t, boundary)).events).toEqual({ old: 0, recent: before.events.recent });
  });

  it('EVENT_RETENTION_DAYS=0 keeps events forever', async () => {
    const t = await buildTestApp({ env: { ...BASE_ENV, EVENT_RETENTION_DAYS: '0' } });
    apps.push(t);
    const client = await makeClient(t);
    await restRegister(t, client);
    const events = await countAll(t.db, 'events');
    expect(events).toBeGreaterThan(0);
    t.clock.advance(3 * 365 * DAY);
    const counts = await t.app.purge.runOnce();
    expect(counts!.events).toBe(0);
    expect(await countAll(t.db, 'events')).toBe(events);
  });

  it('the default keeps events for 365 days', async () => {
    const t = await buildTestApp({ env: BASE_ENV });
    apps.push(t);
    const client = await makeClient(t);
    await restRegister(t, client);
    const events = await countAll(t.db, 'events');
    t.clock.advance(364 * DAY);
    expect((await t.app.purge.runOnce())!.events).toBe(0);
    t.clock.advance(2 * DAY);
    expect((await t.app.purge.runOnce())!.events).toBe(events);
    expect(await countAll(t.db, 'events')).toBe(0);
  });
});

describe('purge: batches and concurrent instances', () => {
  const apps: TestApp[] = [];
  afterEach(async () => {
    while (apps.length) await apps.pop()!.close();
  });

  /** Seven unknown addresses ask for a magic link: 7 one-time tokens, 7 (stand-in) mails, 7 mail counters. */
  async function sevenDeadOfEach(t: TestApp) {
    const client = await makeClient(t);
    await requestMagicLinks(t, client, Array.from({ length: 7 }, () => uniqueEmail('unknown')));
    expect(await countAll(t.db, 'one_time_tokens')).toBe(7);
    expect(await countAll(t.db, 'outbox')).toBe(7);
    expect(await countAll(t.db, 'throttle_counters')).toBe(7);
    t.clock.advance(8 * DAY);
  }

  it('a batch deletes at most PURGE_BATCH_SIZE rows, and a run repeats batches until nothing is left', async () => {
    const t = await buildTestApp({ env: { ...BASE_ENV, PURGE_BATCH_SIZE: '2' } });
    apps.push(t);
    await sevenDeadOfEach(t);

    const step = PURGE_STEPS.find((s) => s.table === 'one_time_tokens')!;
    expect(await step.deleteBatch(t.db, t.app.purge.cutoffs(t.clock.now()), 2)).toBe(2);
    expect(await countAll(t.db, 'one_time_tokens')).toBe(5);

    const counts = await t.app.purge.runOnce();
    expect(counts).toMatchObject({ one_time_tokens: 5, outbox: 7, throttle_counters: 7 });
    for (const table of ['one_time_tokens', 'outbox', 'throttle_counters'] as const) expect(await countAll(t.db, table), table).toBe(0);
  });

  it('two instances purging the same database at once delete every row exactly once', async () => {
    const t = await buildTestApp({ env: { ...BASE_ENV, PURGE_BATCH_SIZE: '3' } });
    apps.push(t);
    const other = await buildApp(t.config, { storage: t.app.storage, clock: t.clock, migrate: false, logStream: false });
    try {
      await sevenDeadOfEach(t);
      const results = await Promise.all([t.app.purge.runOnce(), other.purge.runOnce()]);
      // On PostgreSQL the advisory lock may make one of them skip (null); both finishing is fine too.
      const done = results.filter((r) => r !== null);
      expect(done.length).toBeGreaterThan(0);
      for (const table of ['one_time_tokens', 'outbox', 'throttle_counters'] as const) {
        expect(done.reduce((sum, r) => sum + r[table], 0), table).toBe(7);
        expect(await countAll(t.db, table), table).toBe(0);
      }
    } finally {
      await other.close();
    }
  });
});

describe('purge: the PostgreSQL lock', () => {
  it.runIf(TEST_DIALECT === 'postgres')('a run while another instance holds the lock does nothing and answers null', async () => {
    const t = await buildTestApp({ env: BASE_ENV });
    try {
      const client = await makeClient(t);
      await requestMagicLinks(t, client, [uniqueEmail('unknown')]);
      t.clock.advance(8 * DAY);
      // Another instance's run, on another connection of the pool.
      await withPurgeLock(t.db, 'postgres', async () => {
        expect(await t.app.purge.runOnce()).toBeNull();
      });
      expect(await countAll(t.db, 'one_time_tokens')).toBe(1);
      expect((await t.app.purge.runOnce())!.one_time_tokens).toBe(1);
    } finally {
      await t.close();
    }
  });
});

describe('purge: background job', () => {
  it('runs on its own every PURGE_INTERVAL_SECONDS and stops when the app closes', async () => {
    const t = await buildTestApp({ env: { PURGE_INTERVAL_SECONDS: '1' } });
    const finished = () => t.logs.filter((l) => l.includes('"purge finished"')).length;
    try {
      const deadline = Date.now() + 15_000; // ends as soon as two runs finished; generous for a loaded machine
      while (finished() < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(finished()).toBeGreaterThanOrEqual(2);
    } finally {
      await t.close();
    }
    const atClose = finished();
    await new Promise((r) => setTimeout(r, 1500));
    expect(finished()).toBe(atClose);
  });

  it('does not run with PURGE_INTERVAL_SECONDS=0', async () => {
    const t = await buildTestApp({ env: { PURGE_INTERVAL_SECONDS: '0' } });
    try {
      await new Promise((r) => setTimeout(r, 300));
      expect(t.logs.some((l) => l.includes('"job":"purge"'))).toBe(false);
    } finally {
      await t.close();
    }
  });
});

describe('purge: settings', () => {
  const parse = (env: Record<string, string>) => parseConfig({ NODE_ENV: 'test', ...env });

  it('defaults: hourly, 1,000 rows per batch, events for 365 days, mail for 7 days', () => {
    expect(parse({}).purge).toEqual({ intervalSeconds: 3600, batchSize: 1000, eventRetentionDays: 365, outboxRetentionDays: 7 });
  });

  it('0 turns off the job and keeps events forever; bad values are configuration errors', () => {
    expect(parse({ PURGE_INTERVAL_SECONDS: '0', EVENT_RETENTION_DAYS: '0' }).purge).toMatchObject({ intervalSeconds: 0, eventRetentionDays: 0 });
    const bad: Array<Record<string, string>> = [
      { PURGE_INTERVAL_SECONDS: '-1' },
      { PURGE_INTERVAL_SECONDS: '604801' },
      { PURGE_BATCH_SIZE: '0' },
      { PURGE_BATCH_SIZE: '10001' },
      { EVENT_RETENTION_DAYS: '-1' },
      { OUTBOX_RETENTION_DAYS: '0' },
      { OUTBOX_RETENTION_DAYS: 'week' },
    ];
    for (const env of bad) {
      expect(() => parse(env), JSON.stringify(env)).toThrow(new RegExp(Object.keys(env)[0]!));
    }
  });
});

describe('purge: CLI', { timeout: 120_000 }, () => {
  let env: Record<string, string>;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const database = await freshDatabaseUrl();
    drop = database.drop;
    env = childEnv({ DATABASE_URL: database.url, DATA_DIR: database.dataDir, SECRET_KEY: TEST_SECRET_KEY });
  });
  afterAll(async () => drop?.());

  it('`gatehouse purge --json` runs one purge and prints the counts per table', async () => {
    const result = await runCli(['purge', '--json'], env);
    expect(result.code, result.stderr).toBe(0);
    expect(JSON.parse(result.stdout)).toEqual(Object.fromEntries(TABLES.map((table) => [table, 0])));
  });
});

/**
 * Delivers every pending webhook and logout token before the test moves the clock: drain() skips rows
 * whose lease the background deliverer holds, so wait until those have settled too.
 */
async function settleDeliveries(t: TestApp): Promise<void> {
  for (let i = 0; i < 200; i++) {
    await t.app.webhookDeliverer.drain();
    await t.app.logoutDeliverer.drain();
    const pending =
      (await t.db.selectFrom('webhook_deliveries').select('id').where('status', '=', 'pending').execute()).length +
      (await t.db.selectFrom('logout_deliveries').select('id').where('status', '=', 'pending').execute()).length;
    if (pending === 0) return;
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
  throw new Error('deliveries did not settle');
}
