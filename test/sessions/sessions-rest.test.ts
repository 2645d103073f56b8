import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PLATFORM_DEVELOPER_ID } from '../../src/storage/repos/developers.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeDeveloper } from '../helpers/factories.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { Browser, authorizeAndGetCode, exchangeCode, makeClient, refresh, type TestClient, userinfo } from '../helpers/oauth-flows.js';

/**
 * Sessions over REST (docs/account/sessions.md): `GET /v1/auth/sessions` lists where the person is
 * signed in, `DELETE /v1/auth/sessions/{id}` signs out of one. An app's token sees and revokes only
 * that app's grants; a first-party token (an app the platform runs) the whole account. Real code flow
 * through the hosted pages, so the device recorded is the browser's. SQLite, and PostgreSQL with
 * TEST_DATABASE_URL.
 */

const MAC_CHROME = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const IPHONE_SAFARI = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1';

/** A browser with a user agent and an address, on every request. */
class Device extends Browser {
  constructor(
    t: TestApp,
    private readonly headers: Record<string, string>,
  ) {
    super(t.app);
  }
  override get(url: string, headers: Record<string, string> = {}) {
    return super.get(url, { ...this.headers, ...headers });
  }
  override post(url: string, form: Record<string, string>, headers: Record<string, string> = {}) {
    return super.post(url, form, { ...this.headers, ...headers });
  }
}

let t: TestApp;
let appA: TestClient;
let appB: TestClient;
let firstParty: TestClient;
const secrets: string[] = [];

beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', TRUST_PROXY: '127.0.0.1' } });
  appA = await makeClient(t, { name: 'Notes' });
  appB = await makeClient(t, { name: 'Evil Corp' });
  await makeDeveloper(t.db, { id: PLATFORM_DEVELOPER_ID }).catch(() => undefined);
  firstParty = await makeClient(t, { name: 'Platform app', developerId: PLATFORM_DEVELOPER_ID });
});

afterAll(async () => {
  expectNoSecretsInLogs(t?.logs ?? [], secrets, 6);
  await t?.close();
});

/** Signs `browser` in (registering once) and takes tokens for `client` through the code flow. */
async function tokensVia(browser: Browser, client: TestClient) {
  const { code, verifier, redirectUri } = await authorizeAndGetCode(browser, client);
  // The token request comes from the app's server: its user agent is not the person's device.
  const res = await exchangeCode(t.app, client, code, verifier, redirectUri, {});
  expect(res.statusCode).toBe(200);
  const tokens = res.json() as { access_token: string; refresh_token: string };
  secrets.push(tokens.access_token, tokens.refresh_token);
  return tokens;
}

async function person() {
  const laptop = new Device(t, { 'user-agent': MAC_CHROME, 'x-forwarded-for': '203.0.113.7' });
  const { email } = await laptop.register();
  const phone = new Device(t, { 'user-agent': IPHONE_SAFARI, 'x-forwarded-for': '2001:db8:1234:5678::9' });
  const signedIn = await phone.login(email);
  expect(signedIn.statusCode).toBe(303);
  const cookie = laptop.sessionCookie()!;
  secrets.push(cookie);
  const user = await t.db.selectFrom('users').select(['id']).where('email', '=', email).executeTakeFirstOrThrow();
  return { laptop, phone, email, userId: user.id, cookie };
}

const list = (token: string) => t.app.inject({ method: 'GET', url: '/v1/auth/sessions', headers: { authorization: `Bearer ${token}` } });
const remove = (token: string, id: string) => t.app.inject({ method: 'DELETE', url: `/v1/auth/sessions/${encodeURIComponent(id)}`, headers: { authorization: `Bearer ${token}` } });

interface Item {
  id: string;
  kind: 'browser' | 'grant';
  current: boolean;
  app: { id: string; name: string } | null;
  browser: string | null;
  os: string | null;
  device_type: string | null;
  ip_area: string | null;
  created_at: string;
  last_seen_at: string;
}
const itemsOf = (res: LightMyRequestResponse) => (res.json() as { sessions: Item[] }).sessions;

describe('GET /v1/auth/sessions', () => {
  it("lists this app's grants with device, coarse area and times; the token's own is current", async () => {
    const { laptop, phone } = await person();
    const onLaptop = await tokensVia(laptop, appA);
    await tokensVia(phone, appA);
    t.clock.advance(120);
    const rotated = await refresh(t.app, appA, onLaptop.refresh_token);
    expect(rotated.statusCode).toBe(200);
    const fresh = rotated.json() as { access_token: string; refresh_token: string };
    secrets.push(fresh.access_token, fresh.refresh_token);

    const res = await list(fresh.access_token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const items = itemsOf(res);
    expect(items).toHaveLength(2);
    expect(items.every((i) => i.kind === 'grant' && i.app?.id === appA.app.id && i.app.name === 'Notes')).toBe(true);
    const current = items.find((i) => i.current)!;
    expect(current).toMatchObject({ browser: 'Chrome', os: 'macOS', device_type: 'desktop', ip_area: '203.0.113.x' });
    // Last seen: the latest rotation.
    expect(Date.parse(current.last_seen_at) - Date.parse(current.created_at)).toBeGreaterThanOrEqual(120_000);
    const other = items.find((i) => !i.current)!;
    expect(other).toMatchObject({ browser: 'Safari', os: 'iOS', device_type: 'mobile', ip_area: '2001:db8:1234::/48' });
    // Never the full address, a token, a cookie or the grant id (the tokens' sid).
    const text = res.body;
    expect(text).not.toContain('203.0.113.7');
    expect(text).not.toContain('5678');
    expect(text).not.toMatch(/grt_|bs_|rt_/);
    for (const item of items) expect(item.id).toMatch(/^ses_[A-Za-z0-9_-]{27}$/);
  });

  it('no credential → 401', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/auth/sessions' });
    expect(res.statusCode).toBe(401);
    expect(res.json()).toMatchObject({ code: 'unauthorized' });
  });

  it('a first-party token sees the whole account: browser sessions and every app', async () => {
    const { laptop, phone } = await person();
    await tokensVia(laptop, appA);
    const mine = await tokensVia(phone, firstParty);
    const items = itemsOf(await list(mine.access_token));
    expect(items.filter((i) => i.kind === 'browser')).toHaveLength(2);
    expect(items.filter((i) => i.kind === 'browser').every((i) => !i.current)).toBe(true);
    expect(new Set(items.filter((i) => i.kind === 'grant').map((i) => i.app!.id))).toEqual(new Set([appA.app.id, firstParty.app.id]));
    expect(items.find((i) => i.current)?.app?.id).toBe(firstParty.app.id);
  });
});

describe('DELETE /v1/auth/sessions/{id}', () => {
  it('revokes a grant of this app: its refresh token and access token stop working; session.revoked recorded without secrets', async () => {
    const { laptop, phone, userId } = await person();
    const keep = await tokensVia(laptop, appA);
    const gone = await tokensVia(phone, appA);
    const target = itemsOf(await list(keep.access_token)).find((i) => !i.current)!;
    expect((await userinfo(t.app, gone.access_token)).statusCode).toBe(200);

    const res = await remove(keep.access_token, target.id);
    expect(res.statusCode).toBe(204);
    expect((await userinfo(t.app, gone.access_token)).statusCode).toBe(401);
    expect((await refresh(t.app, appA, gone.refresh_token)).json()).toMatchObject({ error: 'invalid_grant' });
    // The caller's own grant lives on.
    expect((await userinfo(t.app, keep.access_token)).statusCode).toBe(200);
    expect(itemsOf(await list(keep.access_token)).map((i) => i.id)).toEqual([itemsOf(await list(keep.access_token))[0]!.id]);
    // Again: it is gone → 404.
    expect((await remove(keep.access_token, target.id)).statusCode).toBe(404);

    const events = await t.db.selectFrom('events').select(['type', 'app_id', 'data']).where('user_id', '=', userId).where('type', '=', 'session.revoked').execute();
    expect(events).toHaveLength(1);
    expect(JSON.parse(events[0]!.data)).toEqual({ kind: 'grant', app: appA.app.id });
    expect(events[0]!.app_id).toBe(appA.app.id);
  });

  it("attack: app B's token can neither see nor revoke app A's grant nor a browser session (404, as for a made-up id)", async () => {
    const { laptop, phone } = await person();
    const atA = await tokensVia(laptop, appA);
    const atB = await tokensVia(phone, appB);
    const seenByB = itemsOf(await list(atB.access_token));
    expect(seenByB).toHaveLength(1);
    expect(seenByB[0]).toMatchObject({ current: true, app: { id: appB.app.id } });
    expect(seenByB.some((i) => i.kind === 'browser' || i.app?.id === appA.app.id)).toBe(false);

    // The ids of A's grant and of a browser session, as a first-party token would learn them.
    const fp = await tokensVia(laptop, firstParty);
    const all = itemsOf(await list(fp.access_token));
    const grantOfA = all.find((i) => i.app?.id === appA.app.id)!;
    const browserSession = all.find((i) => i.kind === 'browser')!;

    const foreign = [grantOfA.id, browserSession.id, 'ses_AAAAAAAAAAAAAAAAAAAAAAAAAAA', 'grt_notanid'];
    const answers = await Promise.all(foreign.map((id) => remove(atB.access_token, id)));
    for (const res of answers) {
      expect(res.statusCode).toBe(404);
      expect(res.json()).toEqual(answers[0]!.json());
    }
    // Nothing was revoked.
    expect((await userinfo(t.app, atA.access_token)).statusCode).toBe(200);
    expect(itemsOf(await list(fp.access_token)).map((i) => i.id).sort()).toEqual(all.map((i) => i.id).sort());
    // A's own grant id from its token's sid is no session id either.
    const sid = JSON.parse(Buffer.from(atA.access_token.split('.')[1]!, 'base64url').toString()).sid as string;
    expect((await remove(atA.access_token, sid)).statusCode).toBe(404);
  });

  it('a first-party token may sign a browser session out', async () => {
    const { laptop, phone, cookie } = await person();
    const fp = await tokensVia(phone, firstParty);
    const laptopEntry = itemsOf(await list(fp.access_token)).find((i) => i.kind === 'browser' && i.browser === 'Chrome')!;
    expect(laptopEntry).toBeDefined();
    expect(laptopEntry.id).not.toContain(cookie);
    expect((await remove(fp.access_token, laptopEntry.id)).statusCode).toBe(204);
    const account = await laptop.get('/account');
    expect(account.body).not.toContain('data-field="email"');
  });
});
