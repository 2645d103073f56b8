import type { LightMyRequestResponse } from 'fastify';
import net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { buildTestApp, testConfig, type TestApp } from '../helpers/app.js';
import { eventually, holdThreadPool } from '../helpers/concurrency.js';
import { countAll } from '../helpers/db.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { Browser, csrfOf } from '../helpers/oauth-flows.js';
import type { App } from '../../src/storage/repos/apps.js';

// A login flood whose clients give up must not cost an argon2 computation per request that nobody will
// read: a password check still waiting for its turn when its client closes the connection is skipped,
// evaluates nothing, records nothing and gives its lockout slot back (issue 13).
// One that waited over PASSWORD_MAX_WAIT_MS is refused the same way, with 503 and Retry-After.

const MAX_WAIT_MS = 300;

let t: TestApp;
let port: number;
let client: App;

interface Hashing {
  running: number;
  waiting: number;
  total: number;
  skipped: number;
  overdue: number;
}

/** The argon2 queue as the metrics show it. */
async function hashing(): Promise<Hashing> {
  const body = await t.app.metrics!.metrics();
  const read = (name: string) => Number(new RegExp(`^gatehouse_password_hashing_${name} (\\d+)$`, 'm').exec(body)![1]);
  return { running: read('running'), waiting: read('waiting'), total: read('total'), skipped: read('skipped_total'), overdue: read('overdue_total') };
}

/** Sends one login over a connection of its own; the answer is never read. */
function sendLogin(body: Record<string, string>): Promise<net.Socket> {
  const json = JSON.stringify(body);
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1', () => {
      socket.write(`POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(json)}\r\n\r\n${json}`);
      resolve(socket);
    });
    socket.on('error', reject);
  });
}

/** Logins whose client left before the answer, as the metrics count them. */
async function abandonedLogins(): Promise<number> {
  const body = await t.app.metrics!.metrics();
  return Number(/^gatehouse_http_requests_abandoned_total\{method="POST",route="\/v1\/auth\/login"\} (\d+)$/m.exec(body)?.[1] ?? 0);
}

const openConnections = () => new Promise<number>((resolve, reject) => t.app.server.getConnections((error, n) => (error ? reject(error) : resolve(n))));

const failedLogins = () => countAll(t.db, 'events', { type: 'user.login_failed' });

/** The failures an address has used in its lockout window (docs/reference/rest-api.md#throttling). */
async function lockoutCount(email: string): Promise<number> {
  const row = await t.db.selectFrom('throttle_counters').select('count').where('key', '=', `login:${email}`).executeTakeFirst();
  return row?.count ?? 0;
}

beforeAll(async () => {
  // Room for every attempt of the test in one address's lockout window; a short bound on the wait.
  t = await buildTestApp({ env: { METRICS: '1', IP_AUTH_PER_MINUTE: '10000', LOGIN_MAX_FAILURES: '64', PASSWORD_MAX_WAIT_MS: String(MAX_WAIT_MS) } });
  client = await makeApp(t.db);
  await t.app.listen({ host: '127.0.0.1', port: 0 });
  port = (t.app.server.address() as net.AddressInfo).port;
});

afterAll(async () => {
  await t.close();
});

describe('password checks whose client has gone', () => {
  it('are skipped at their turn: nothing evaluated or recorded, the slot given back, the queue goes on', async () => {
    const user = await makeUser(t.app, { email: 'stays@example.com' });
    // The dummy hash (unknown emails) exists before the pool is held.
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: 'warm@example.com', password: 'not the password', client_id: client.id } })).statusCode).toBe(401);
    const before = await hashing();
    const failedBefore = await failedLogins();

    // With libuv's threads held, the checks that got a turn cannot finish, and the rest wait in line.
    const release = holdThreadPool();
    const sockets: net.Socket[] = [];
    let limit = 0;
    try {
      // Sent one by one, each in the queue before the next: the first ones get the turns there are
      // (one per core plus one), the last six wait.
      let queue = await hashing();
      while (queue.waiting < 6) {
        sockets.push(await sendLogin({ email: user.email, password: `wrong guess ${sockets.length}`, client_id: client.id }));
        expect(await eventually(async () => {
          queue = await hashing();
          return queue.running + queue.waiting === sockets.length;
        })).toBe(true);
      }
      limit = queue.running;
      for (const socket of sockets) socket.destroy();
      expect(await eventually(async () => (await openConnections()) === 0)).toBe(true);
    } finally {
      await release();
    }

    expect(await eventually(async () => {
      const now = await hashing();
      return now.running === 0 && now.waiting === 0;
    }, 10_000)).toBe(true);
    const after = await hashing();
    expect(after.total - before.total).toBe(limit);
    expect(after.skipped - before.skipped).toBe(6);
    // Every one of them was left unanswered, the computed ones too: counted, and one access line each.
    expect(await abandonedLogins()).toBe(sockets.length);
    const abandonedLines = t.logs.map((line) => JSON.parse(line) as { msg: string; req?: { url: string }; res?: { statusCode: number } }).filter((l) => l.msg === 'request abandoned');
    expect(abandonedLines.map((l) => [l.req?.url, l.res?.statusCode])).toEqual(Array(sockets.length).fill(['/v1/auth/login', 499]));
    expect(t.logs.join('\n')).not.toContain('wrong guess');
    // Only the computed checks were evaluated: one user.login_failed each, and only their slots stay taken.
    // (Both are written after the turn is handed on, so they are waited for; no more can come.)
    expect(await eventually(async () => (await failedLogins()) - failedBefore === limit)).toBe(true);
    expect(await eventually(async () => (await lockoutCount(user.email)) === limit)).toBe(true);

    // The turns were all handed back: logins go on, right and wrong.
    const ok = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: user.password, client_id: client.id } });
    expect(ok.statusCode).toBe(200);
    const wrong = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: 'not the password', client_id: client.id } });
    expect(wrong.statusCode).toBe(401);
    expect((await hashing()).total - after.total).toBe(2);
    expect(await lockoutCount(user.email)).toBe(1);
  });
});

describe('password checks that waited over PASSWORD_MAX_WAIT_MS', () => {
  it('answer 503 with Retry-After at their turn: nothing evaluated or recorded, the slot given back', async () => {
    const user = await makeUser(t.app, { email: 'waits@example.com' });
    const before = await hashing();
    const failedBefore = await failedLogins();
    const login = (password: string) => t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password, client_id: client.id } });
    // The hosted sign-in form, opened before the line fills.
    const browser = new Browser(t.app);
    const csrf = csrfOf((await browser.get('/login')).body);

    const release = holdThreadPool();
    const answers: Array<Promise<LightMyRequestResponse>> = [];
    try {
      // Each login joins before the next is sent. Wrong guesses take the turns there are, and the first
      // to wait is one more; then the right password through the hosted form and a last wrong one wait.
      const send = async (answer: Promise<LightMyRequestResponse>) => {
        answers.push(answer);
        expect(await eventually(async () => {
          const queue = await hashing();
          return queue.running + queue.waiting === answers.length;
        })).toBe(true);
      };
      while ((await hashing()).waiting === 0) await send(login(`wrong guess ${answers.length}`));
      await send(browser.post('/login', { csrf, email: user.email, password: user.password, action: 'login' }));
      await send(login('wrong again'));
      // Every waiting check joined the line before this point: after the pause, each has waited longer
      // than the bound however slowly the machine runs.
      await new Promise((resolve) => setTimeout(resolve, MAX_WAIT_MS + 100));
    } finally {
      await release();
    }
    const settled = await Promise.all(answers);
    const computed = settled.length - 3;
    expect(settled.slice(0, computed).map((r) => r.statusCode)).toEqual(Array(computed).fill(401));
    const [firstLate, form, lastLate] = settled.slice(computed);
    for (const refused of [firstLate!, lastLate!]) {
      expect(refused.statusCode).toBe(503);
      expect(refused.json()).toMatchObject({ code: 'service_unavailable' });
      expect(refused.headers['retry-after']).toBe('1');
    }
    // The hosted form stays, with what was typed and when to try again; nobody was signed in.
    expect(form!.statusCode).toBe(503);
    expect(form!.headers['retry-after']).toBe('1');
    expect(form!.body).toContain('The service is busy right now. Try again in 1 second.');
    expect(form!.body).toContain(`value="${user.email}"`);
    const signIns = () => countAll(t.db, 'events', { type: 'user.login_succeeded', user_id: user.id });
    expect(await signIns()).toBe(0);

    const after = await hashing();
    expect(after.total - before.total).toBe(computed);
    expect(after.overdue - before.overdue).toBe(3);
    expect(after.skipped - before.skipped).toBe(0);
    expect((await failedLogins()) - failedBefore).toBe(computed);
    expect(await lockoutCount(user.email)).toBe(computed);

    // With the line empty again, the same form signs in, and the address's count is cleared.
    expect((await browser.submit('/login', { email: user.email, password: user.password, action: 'login' })).statusCode).toBe(303);
    expect(await signIns()).toBe(1);
    expect(await lockoutCount(user.email)).toBe(0);
  });
});

describe('PASSWORD_MAX_WAIT_MS', () => {
  it.each([
    [undefined, 5000],
    ['0', 0],
    ['250', 250],
    ['600000', 600000],
  ])('%j → a bound of %i ms (0: none)', (value, expected) => {
    expect(testConfig(value === undefined ? {} : { PASSWORD_MAX_WAIT_MS: value }).passwordMaxWaitMs).toBe(expected);
  });

  it.each(['-1', '1.5', 'five', '600001'])('%j is refused at start', (value) => {
    expect(() => testConfig({ PASSWORD_MAX_WAIT_MS: value })).toThrow(ConfigError);
  });
});
