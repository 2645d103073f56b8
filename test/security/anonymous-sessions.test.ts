import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeUrl, Browser, makeClient, relative, type TestClient } from '../helpers/oauth-flows.js';
import { startProvider, type TestProvider } from '../helpers/oidc-provider.js';

/**
 * Anonymous requests do not grow storage: a visitor's session is its cookie, and what it must
 * remember before someone signs in (the authorization request in flight) travels in a sealed cookie
 * bound to that session. A row is written only at sign-in, taking the request along. Each test runs
 * the flood first, then the legitimate path through the same doors.
 */
describe('anonymous visitors and storage', () => {
  let t: TestApp;
  let client: TestClient;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000' } });
    client = await makeClient(t);
  });
  afterAll(async () => {
    await t?.close();
  });

  /** The sealed state's cookies an answer sets. */
  const flowCookies = (res: { cookies: Array<{ name: string; value: string }> }) => res.cookies.filter((c) => c.name.startsWith('gh_sid_flow') && c.value !== '');

  it('cookieless GETs of the sign-in pages write no session row, and their forms still work', async () => {
    const before = await countAll(t.db, 'browser_sessions');
    for (let i = 0; i < 40; i++) {
      for (const path of ['/login', '/register', '/magic-link/request', '/password/forgot', '/account', '/console/login']) {
        expect([200, 303]).toContain((await t.app.inject({ method: 'GET', url: path })).statusCode);
      }
    }
    expect(await countAll(t.db, 'browser_sessions')).toBe(before);
    // Positive control: the anonymous session's CSRF token is accepted, and sign-in writes one row.
    const b = new Browser(t.app);
    const { email } = await b.register();
    expect(await countAll(t.db, 'browser_sessions')).toBe(before + 1);
    const again = new Browser(t.app);
    expect((await again.login(email)).statusCode).toBe(303);
  });

  it('150 cookieless authorization requests write nothing; the one a person finishes signs in with one row', async () => {
    const before = { sessions: await countAll(t.db, 'browser_sessions'), tokens: await countAll(t.db, 'one_time_tokens') };
    for (let i = 0; i < 150; i++) {
      const res = await t.app.inject({ method: 'GET', url: authorizeUrl(client, { state: `flood-${i}` }).url });
      expect(res.statusCode).toBe(302);
      expect(flowCookies(res)).toHaveLength(1);
    }
    expect(await countAll(t.db, 'browser_sessions')).toBe(before.sessions);
    expect(await countAll(t.db, 'one_time_tokens')).toBe(before.tokens);

    const user = await makeUser(t.app);
    const browser = new Browser(t.app);
    const start = await browser.get(authorizeUrl(client, { state: 'st-real' }).url);
    const login = await browser.submit(relative(String(start.headers.location)), { email: user.email, password: user.password, action: 'login' });
    expect(login.headers.location).toMatch(/^\/oauth\/authorize\?.*state=st-real/);
    // Signing in moved the request into the session's row and cleared the sealed cookie.
    expect(flowCookies(login)).toHaveLength(0);
    expect(login.cookies.some((c) => c.name === 'gh_sid_flow' && c.value === '')).toBe(true);
    expect(await countAll(t.db, 'browser_sessions')).toBe(before.sessions + 1);
    const consent = await browser.get(String(login.headers.location));
    expect(relative(String(consent.headers.location))).toMatch(/^\/consent/);
  });

  it('only the parameters Gatehouse reads are kept: sixty junk parameters do not grow the sealed state', async () => {
    const junk = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`junk_${i}`, 'x'.repeat(400)]));
    const withJunk = flowCookies(await t.app.inject({ method: 'GET', url: authorizeUrl(client, { state: 'st-keep', extra: junk }).url }));
    const plain = flowCookies(await t.app.inject({ method: 'GET', url: authorizeUrl(client, { state: 'st-keep' }).url }));
    expect(withJunk).toHaveLength(1);
    expect(withJunk[0]!.value.length).toBeLessThan(plain[0]!.value.length + 20);
  });

  it('the largest request the limits allow fits; the state is bound to its session, unreadable and unforgeable', async () => {
    const longUri = `https://a.example/cb/${'p'.repeat(1970)}`;
    const big = await makeClient(t, { redirectUris: [longUri] });
    const random = (n: number) => Array.from({ length: n }, () => 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_'[Math.floor(Math.random() * 64)]).join('');
    const state = random(4096);
    const browser = new Browser(t.app);
    const start = await browser.get(authorizeUrl(big, { state, extra: { nonce: random(512) } }).url);
    expect(start.statusCode).toBe(302);
    expect(flowCookies(start).length).toBeGreaterThanOrEqual(1);
    for (const c of flowCookies(start)) expect(c.value.length).toBeLessThanOrEqual(3800);
    expect(flowCookies(start).map((c) => c.value).join('')).not.toContain(state.slice(0, 40));

    // Another session presenting this browser's sealed state gets nothing from it.
    const thief = new Browser(t.app);
    await thief.get('/login');
    for (const c of flowCookies(start)) thief.jar.cookies.set(c.name, c.value);
    const user = await makeUser(t.app);
    const stolen = await thief.submit('/login', { email: user.email, password: user.password, action: 'login' });
    expect(stolen.headers.location).toBe('/account');
    // A damaged state is ignored too.
    const tampered = new Browser(t.app);
    await tampered.get(authorizeUrl(client, { state: 'st-tamper' }).url);
    const sealed = tampered.jar.cookies.get('gh_sid_flow')!;
    tampered.jar.cookies.set('gh_sid_flow', sealed.slice(0, -4) + (sealed.endsWith('AAAA') ? 'BBBB' : 'AAAA'));
    expect((await tampered.submit('/login', { email: user.email, password: user.password, action: 'login' })).headers.location).toBe('/account');

    // Positive control: the browser that made the request finishes it, state intact.
    const login = await browser.submit(relative(String(start.headers.location)), { email: user.email, password: user.password, action: 'login' });
    const resumed = new URL(`http://x${String(login.headers.location)}`);
    expect(resumed.pathname).toBe('/oauth/authorize');
    expect(resumed.searchParams.get('state')).toBe(state);
    expect(resumed.searchParams.get('redirect_uri')).toBe(longUri);
  });

  it('the sealed state expires with the anonymous session', async () => {
    const browser = new Browser(t.app);
    await browser.get(authorizeUrl(client, { state: 'st-old' }).url);
    t.clock.advance(t.config.ttl.browserSessionIdle + 1);
    const user = await makeUser(t.app);
    const login = await browser.submit('/login', { email: user.email, password: user.password, action: 'login' });
    expect(login.headers.location).toBe('/account');
  });
});

describe('provider sign-ins started by anonymous visitors', () => {
  let t: TestApp;
  let provider: TestProvider;
  beforeAll(async () => {
    provider = await startProvider({ redirectUris: ['http://localhost:3000/oauth/idp/callback'] });
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '5', IDP_ISSUER: provider.issuer, IDP_CLIENT_ID: provider.clientId, IDP_CLIENT_SECRET: provider.clientSecret } });
  });
  afterAll(async () => {
    await t?.close();
    await provider?.close();
  });

  it('each start stores a transaction, so starts are bounded per IP: past the limit the app is told to try later, and nothing is stored', async () => {
    const client = await makeClient(t, { redirectUris: ['com.example.app:/cb'] });
    const start = (state: string) => t.app.inject({ method: 'GET', url: `/oauth/idp/start?${new URLSearchParams({ client_id: client.app.id, redirect_uri: 'com.example.app:/cb', state })}` });
    for (let i = 0; i < 5; i++) {
      const res = await start(`s${i}`);
      expect(res.statusCode).toBe(302);
      expect(res.headers.location).toContain(provider.issuer);
    }
    const rows = await countAll(t.db, 'one_time_tokens', { kind: 'idp_state' });
    expect(rows).toBe(5);
    const refused = await start('s-over');
    expect(refused.statusCode).toBe(302);
    const back = new URL(String(refused.headers.location));
    expect(`${back.protocol}${back.pathname}`).toBe('com.example.app:/cb');
    expect(back.searchParams.get('error')).toBe('temporarily_unavailable');
    expect(back.searchParams.get('state')).toBe('s-over');
    expect(await countAll(t.db, 'one_time_tokens', { kind: 'idp_state' })).toBe(rows);
  });
});
