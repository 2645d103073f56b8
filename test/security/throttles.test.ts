import type { LightMyRequestResponse } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';
import { MAX_FAILED_ADMIN_TOKENS_PER_MINUTE } from '../../src/plugins/admin-token.js';
import { ConfigError } from '../../src/config.js';
import { MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE } from '../../src/dev/auth.js';
import { MAX_FAILED_SECRETS_PER_MINUTE } from '../../src/sign-in/client-auth.js';
import { buildTestApp, FrozenClock, nextWindowStart, TEST_ADMIN_TOKEN, TEST_SECRET_KEY, testConfig, type TestApp } from '../helpers/app.js';
import { adminHeaders, bearer } from '../helpers/dev-api.js';
import { makeApp, makeDeveloper, makeUser } from '../helpers/factories.js';
import { makeClient, tokenRequest } from '../helpers/oauth-flows.js';
import { childEnv, freshDatabaseUrl, runCli } from '../helpers/processes.js';

/**
 * Issue "Security hardening", items 9 and 11:
 * - a credential guessed past its per-IP limit is refused for the rest of the window even when it is
 *   right (admin token, developer API keys, client secrets); ADMIN_TOKEN is at least 32 characters;
 * - authentication schemes are case-insensitive (RFC 9110 §11.1) wherever a Bearer or Basic
 *   credential is parsed.
 * Time only moves through a frozen clock that starts at a window boundary, so no assertion depends
 * on where the wall clock falls.
 */

const WINDOW = 60;
const apps: TestApp[] = [];

/** buildTestApp with a frozen clock at the start of a one-minute window. */
async function frozenApp(env: Record<string, string> = {}): Promise<TestApp> {
  const t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000', ...env }, clock: new FrozenClock(nextWindowStart(WINDOW)) });
  apps.push(t);
  return t;
}

afterEach(async () => {
  for (const t of apps.splice(0)) await t.close();
});

const GUESSER = '203.0.113.7';
const OTHER_IP = '198.51.100.20';

function expectRateLimited(res: LightMyRequestResponse, retryAfter: number, field: 'code' | 'error' = 'code'): void {
  expect(res.statusCode, res.body).toBe(429);
  expect(res.json()[field]).toBe('rate_limited');
  expect(Number(res.headers['retry-after'])).toBe(retryAfter);
}

describe('credential guessing: an IP over its limit is refused for the rest of the window, right credential included', () => {
  it(`admin token: after ${MAX_FAILED_ADMIN_TOKENS_PER_MINUTE} wrong tokens the right one answers 429 from that IP until the minute is over`, async () => {
    const t = await frozenApp();
    const admin = (headers: Record<string, string>, remoteAddress = GUESSER) => t.app.inject({ url: '/v1/admin/developers', headers, remoteAddress });
    for (let i = 0; i < MAX_FAILED_ADMIN_TOKENS_PER_MINUTE; i++) expect((await admin(bearer(`guess-${i}-0123456789abcdef0123456789abcdef`))).statusCode).toBe(401);
    t.clock.advance(15);

    // The attack: the right token, still inside the minute, from the guessing IP.
    expectRateLimited(await admin(adminHeaders), WINDOW - 15);
    expectRateLimited(await admin(bearer('another-guess-0123456789abcdef0123456789')), WINDOW - 15);
    expectRateLimited(await admin({}), WINDOW - 15);

    // Positive controls: another IP is not affected; the guessing IP works again in the next minute.
    expect((await admin(adminHeaders, OTHER_IP)).statusCode).toBe(200);
    t.clock.advance(WINDOW - 15);
    expect((await admin(adminHeaders)).statusCode).toBe(200);
    expect((await admin(bearer('wrong-again-0123456789abcdef0123456789'))).statusCode).toBe(401);
  });

  it(`developer API key: after ${MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE} wrong keys a right key answers 429 from that IP until the minute is over`, async () => {
    const t = await frozenApp();
    const { apiKey } = await makeDeveloper(t.db);
    const dev = (key: string, remoteAddress = GUESSER) => t.app.inject({ url: '/v1/dev/apps', headers: bearer(key), remoteAddress });
    for (let i = 0; i < MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE; i++) expect((await dev(`dk_guess${i}`)).statusCode).toBe(401);

    expectRateLimited(await dev(apiKey), WINDOW);
    expectRateLimited(await dev('dk_guess-more'), WINDOW);

    expect((await dev(apiKey, OTHER_IP)).statusCode).toBe(200);
    t.clock.advance(WINDOW);
    expect((await dev(apiKey)).statusCode).toBe(200);
  });

  it(`client secret: after ${MAX_FAILED_SECRETS_PER_MINUTE} wrong secrets for an app the right one answers 429 from that IP, at every door, until the minute is over`, async () => {
    const t = await frozenApp();
    const client = await makeClient(t, { type: 'confidential' });
    const basic = (secret: string) => ({ authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.app.id)}:${encodeURIComponent(secret)}`).toString('base64')}` });
    const token = (secret: string, remoteAddress = GUESSER) =>
      t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        remoteAddress,
        headers: { 'content-type': 'application/x-www-form-urlencoded', ...basic(secret) },
        payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'rt_unknown' }).toString(),
      });
    for (let i = 0; i < MAX_FAILED_SECRETS_PER_MINUTE; i++) {
      const res = await token(`cs_wrong-${i}`);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    }

    // The attack: the right secret, from the guessing IP, at the token endpoint and at the REST door.
    expectRateLimited(await token(client.secret!), WINDOW, 'error');
    const rest = await t.app.inject({
      method: 'POST',
      url: '/v1/auth/refresh',
      remoteAddress: GUESSER,
      payload: { refresh_token: 'rt_unknown', client_id: client.app.id, client_secret: client.secret },
    });
    expectRateLimited(rest, WINDOW);

    // Positive controls: the app's own servers (another IP) authenticate (then the unknown grant →
    // invalid_grant, not invalid_client); another app is unaffected; the next minute works again.
    const fromServer = await token(client.secret!, OTHER_IP);
    expect(fromServer.statusCode).toBe(400);
    expect(fromServer.json().error).toBe('invalid_grant');
    const other = await makeClient(t, { type: 'confidential' });
    const otherRes = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_unknown', client_id: other.app.id, client_secret: other.secret! });
    expect(otherRes.json().error).toBe('invalid_grant');
    t.clock.advance(WINDOW);
    expect((await token(client.secret!)).json().error).toBe('invalid_grant');
  });
});

describe('ADMIN_TOKEN length', () => {
  it('a token shorter than 32 characters is a startup error that names the problem', async () => {
    const database = await freshDatabaseUrl();
    try {
      const result = await runCli(['migrate'], childEnv({ DATABASE_URL: database.url, DATA_DIR: database.dataDir, SECRET_KEY: TEST_SECRET_KEY, ADMIN_TOKEN: 'a'.repeat(31) }));
      expect(result.code, result.stderr).toBe(2);
      expect(result.stderr.trim()).toBe('config error: ADMIN_TOKEN: ADMIN_TOKEN must be at least 32 characters');
    } finally {
      await database.drop();
    }
    expect(() => testConfig({ ADMIN_TOKEN: 'b'.repeat(31) })).toThrow(ConfigError);
  }, 60_000);

  it('32 characters are accepted (and the test token is long enough)', () => {
    expect(TEST_ADMIN_TOKEN.length).toBeGreaterThanOrEqual(32);
    expect(testConfig({ ADMIN_TOKEN: 'c'.repeat(32) }).adminToken).toBe('c'.repeat(32));
  });
});

describe('authentication schemes are case-insensitive (RFC 9110 §11.1)', () => {
  it('an access token works as `bearer`, `BEARER` and `Bearer` (userinfo, profile); a malformed header is still refused', async () => {
    const t = await frozenApp();
    const client = await makeApp(t.db);
    const user = await makeUser(t.app, { email: 'scheme@example.com', password: 'scheme test passphrase' });
    const login = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: user.password, client_id: client.id } });
    expect(login.statusCode, login.body).toBe(200);
    const accessToken = login.json().access_token as string;
    const userinfo = (authorization: string) => t.app.inject({ url: '/oauth/userinfo', headers: { authorization } });

    // The attack on the old parser: a lowercase scheme was refused.
    const lower = await userinfo(`bearer ${accessToken}`);
    expect(lower.statusCode, lower.body).toBe(200);
    expect(lower.json().sub).toBe(user.id);
    expect((await userinfo(`BEARER ${accessToken}`)).statusCode).toBe(200);
    expect((await t.app.inject({ url: `/v1/profile/${user.id}`, headers: { authorization: `bearer ${accessToken}` } })).statusCode).not.toBe(401);

    // Positive controls: the canonical form works; other schemes and malformed values do not.
    expect((await userinfo(`Bearer ${accessToken}`)).statusCode).toBe(200);
    for (const authorization of [`Bearerx ${accessToken}`, `Basic ${accessToken}`, 'bearer', `bearer ${accessToken} extra`]) {
      expect((await userinfo(authorization)).statusCode, authorization).toBe(401);
    }
  });

  it('the admin token, developer keys and Basic client credentials accept any case of their scheme', async () => {
    const t = await frozenApp();
    expect((await t.app.inject({ url: '/v1/admin/developers', headers: { authorization: `bearer ${TEST_ADMIN_TOKEN}` } })).statusCode).toBe(200);
    expect((await t.app.inject({ url: '/v1/admin/developers', headers: { authorization: `BEARER ${TEST_ADMIN_TOKEN}` } })).statusCode).toBe(200);
    const { apiKey } = await makeDeveloper(t.db);
    expect((await t.app.inject({ url: '/v1/dev/apps', headers: { authorization: `bEaReR ${apiKey}` } })).statusCode).toBe(200);

    const client = await makeClient(t, { type: 'confidential' });
    const credentials = Buffer.from(`${encodeURIComponent(client.app.id)}:${encodeURIComponent(client.secret!)}`).toString('base64');
    for (const scheme of ['basic', 'BASIC', 'Basic']) {
      const res = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_unknown' }, { authorization: `${scheme} ${credentials}` });
      expect(res.json().error, scheme).toBe('invalid_grant');
    }
    // Negative control: the admin token under another scheme stays refused.
    expect((await t.app.inject({ url: '/v1/admin/developers', headers: { authorization: `basic ${TEST_ADMIN_TOKEN}` } })).statusCode).toBe(401);
  });
});
