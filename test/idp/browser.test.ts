import { createServer } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { DEFAULT_SCOPE } from '../../src/shared/scopes.js';
import { grantConsent } from '../../src/storage/repos/consents.js';
import { findIdentity, insertIdentity } from '../../src/storage/repos/idp.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { startProvider, type TestProvider } from '../helpers/oidc-provider.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';

const REDIRECT = 'com.example.app://cb';
const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

describe.skipIf(!haveChromium)('provider sign-in in a real browser (path B, bind-first, pending → /continue → resume)', () => {
  let t: TestApp;
  let p: TestProvider;
  let browser: Browser;
  let base: string;
  let clientId: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    p = await startProvider({ redirectUris: [`${base}/oauth/idp/callback`, `${base}/idp-test-cb`] });
    t = await buildTestApp({ env: { BASE_URL: base, IDP_ISSUER: p.issuer, IDP_CLIENT_ID: p.clientId, IDP_CLIENT_SECRET: p.clientSecret, IDP_NAME: 'TestIdP' } });
    await t.app.listen({ port, host: '127.0.0.1' });
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
    browser = await launchChromium();
  });
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await p?.close();
  });

  async function newPage(): Promise<Page> {
    const context = await browser.newContext();
    // Only loopback: the provider's page imports a web font we must not fetch.
    await context.route((url) => !['127.0.0.1'].includes(url.hostname), (route) => route.abort());
    return context.newPage();
  }

  /** Signs in at the provider's development form when it is shown. */
  async function providerLogin(page: Page, sub: string) {
    await page.waitForSelector('input[name=login]');
    await page.fill('input[name=login]', sub);
    await page.fill('input[name=password]', 'anything');
    await Promise.all([page.waitForEvent('framenavigated'), page.click('button[type=submit]')]);
  }

  /**
   * Watches the real browser's navigation to a Gatehouse route through the DevTools protocol (Fetch
   * domain, response stage): Chromium's own request is paused once Gatehouse's response has arrived
   * and before Chromium acts on it, so its status and `Location` are read exactly as the browser got
   * them. A 3xx leaving Gatehouse is recorded; one to a non-http(s) scheme (a native app's custom
   * scheme, which has no handler in headless Chromium) is answered with a 200 stub in its place, where
   * the OS would hand it to the app; every other response continues unchanged.
   */
  async function watchRedirect(page: Page, path: string): Promise<() => Promise<{ status: number; location: string }>> {
    const cdp = await page.context().newCDPSession(page);
    let resolve!: (v: { status: number; location: string }) => void;
    const result = new Promise<{ status: number; location: string }>((r) => (resolve = r));
    cdp.on('Fetch.requestPaused', (event) => {
      void (async () => {
        const status = event.responseStatusCode ?? 0;
        const location = event.responseHeaders?.find((h) => h.name.toLowerCase() === 'location')?.value;
        const leaves = status >= 300 && status < 400 && location !== undefined && new URL(location, event.request.url).origin !== base;
        if (leaves) resolve({ status, location });
        if (leaves && !/^https?:/i.test(location)) {
          const body = Buffer.from('handed to the app').toString('base64');
          await cdp.send('Fetch.fulfillRequest', { requestId: event.requestId, responseCode: 200, responseHeaders: [{ name: 'content-type', value: 'text/plain' }], body });
        } else {
          await cdp.send('Fetch.continueResponse', { requestId: event.requestId });
        }
      })();
    });
    await cdp.send('Fetch.enable', { patterns: [{ urlPattern: `${base}${path}*`, requestStage: 'Response' }] });
    return () => result;
  }

  it('bind-first: an unbound provider account is bound after a password sign-in, then the app gets a session', async () => {
    const user = await makeUser(t.app);
    const page = await newPage();
    const final = await watchRedirect(page, '/continue');
    await page.goto(`${base}/oauth/idp/start?client_id=${clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}&state=st-1`);
    await providerLogin(page, 'erin-sub');
    await page.waitForSelector('button[value=login]');
    expect(page.url()).toContain('/continue?ticket=bt_');
    expect(await page.content()).toContain('bound');
    await page.fill('input[name=email]', user.email);
    await page.fill('input[name=password]', user.password);
    await page.click('button[value=login]');
    const { status, location } = await final();
    expect(status).toBe(303);
    const loc = new URL(location);
    expect(loc.protocol).toBe('com.example.app:');
    expect(loc.searchParams.get('state')).toBe('st-1');
    const claims = await t.app.tokens.verifySession(loc.searchParams.get('session')!, clientId);
    expect(claims.sub).toBe(user.id);
    expect((await findIdentity(t.db, p.issuer, 'erin-sub'))?.userId).toBe(user.id);
    const events = await t.db.selectFrom('events').select(['type', 'data']).where('user_id', '=', user.id).execute();
    expect(events.map((e) => e.type)).toContain('idp.bound');
    await page.context().close();
  });

  it('path B with response_mode=code and a custom-scheme redirect_uri ends at the app with a code that redeems with the PKCE verifier', async () => {
    const user = await makeUser(t.app);
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: 'frank-sub', email: null, createdAt: t.clock.now() });
    await grantConsent(t.db, clientId, user.id, DEFAULT_SCOPE, t.clock.now());
    const { verifier, challenge } = pkce();
    const state = 'st-2 ü/+&=';
    const page = await newPage();
    const final = await watchRedirect(page, '/oauth/idp/callback');
    const start = new URL(`${base}/oauth/idp/start`);
    for (const [k, v] of Object.entries({ client_id: clientId, redirect_uri: REDIRECT, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state })) start.searchParams.set(k, v);
    await page.goto(start.toString());
    expect(new URL(page.url()).origin).toBe(p.issuer);
    await providerLogin(page, 'frank-sub');
    const { status, location } = await final();
    expect([302, 303]).toContain(status);
    const loc = new URL(location);
    expect(loc.protocol).toBe('com.example.app:');
    expect(`${loc.protocol}//${loc.host}${loc.pathname}`).toBe(REDIRECT);
    expect(loc.searchParams.get('state')).toBe(state);
    expect(loc.searchParams.get('iss')).toBe(base);
    expect(loc.searchParams.get('session')).toBeNull();
    const code = loc.searchParams.get('code')!;
    expect(code).toBeTruthy();
    // The browser's last navigation was that callback: its custom-scheme hand-off got the stub.
    await page.waitForURL((url) => url.origin === base && url.pathname === '/oauth/idp/callback');
    expect(await page.locator('body').innerText()).toBe('handed to the app');
    const redeem = (code_verifier: string) =>
      t.app.inject({
        method: 'POST',
        url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier }).toString(),
      });
    const token = await redeem(verifier);
    expect(token.statusCode).toBe(200);
    expect(token.json()).toMatchObject({ token_type: 'Bearer' });
    expect(token.json().access_token).toBeTypeOf('string');
    expect((await redeem(verifier)).statusCode).toBe(400);
    await page.context().close();
  });

  it('a custom-scheme redirect_uri that is not registered renders the 400 page and never leaves Gatehouse', async () => {
    const page = await newPage();
    const origins = new Set<string>();
    page.on('request', (r) => origins.add(new URL(r.url()).origin));
    const { challenge } = pkce();
    const bad = `${REDIRECT}X`;
    const res = await page.goto(`${base}/oauth/idp/start?client_id=${clientId}&redirect_uri=${encodeURIComponent(bad)}&state=st-x&response_mode=code&code_challenge=${challenge}&code_challenge_method=S256`);
    expect(res?.status()).toBe(400);
    expect(res?.headers()['content-type']).toMatch(/^text\/html/);
    expect(res?.headers().location).toBeUndefined();
    expect(new URL(page.url()).origin).toBe(base);
    expect(await page.locator('main code, body code').first().innerText()).toBe('invalid_redirect_uri');
    // The refused value is shown as text only (issue 15): nothing on the page links, posts or refreshes to the app.
    expect(await page.locator('main code').nth(1).innerText()).toBe(bad);
    expect(await page.locator('[href^="com.example.app"], [action^="com.example.app"], meta[http-equiv]').count()).toBe(0);
    await page.waitForLoadState('load');
    expect([...origins]).toEqual([base]);
    expect(new URL(page.url()).pathname).toBe('/oauth/idp/start');
    await page.context().close();
  });

  it('path A pending: the hosted consent page, then resume gives a code that redeems for tokens', async () => {
    const user = await makeUser(t.app);
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: 'gina-sub', email: null, createdAt: t.clock.now() });
    const { verifier, challenge } = pkce();
    const params = { client_id: clientId, redirect_uri: REDIRECT, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 'st-3' };
    const ex = await t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { ...params, id_token: await p.sign(p.claims('gina-sub')) } });
    expect(ex.statusCode).toBe(200);
    const pending = ex.json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'consent', authorize_params: { client_id: clientId, redirect_uri: REDIRECT, response_mode: 'code' } });
    expect(pending.hosted_url).toMatch(new RegExp(`^${base}/continue\\?ticket=tk_`));
    expect(pending.hosted_url).not.toContain(pending.session);

    // Resume before consenting: still pending, with a fresh ticket; the old one dies.
    const early = await t.app.inject({ method: 'POST', url: '/oauth/idp/resume', payload: { ...params, session: pending.session, consent: '1' } });
    expect(early.json().status).toBe('pending');
    expect((await t.app.inject(pending.hosted_url.slice(base.length))).statusCode).toBe(400);
    const hostedUrl: string = early.json().hosted_url;

    const page = await newPage();
    await page.route(`${base}/oauth/authorize*`, (route) => route.fulfill({ status: 200, body: 'intercepted' }));
    await page.goto(hostedUrl);
    const nav = page.waitForRequest((r) => r.url().startsWith(`${base}/oauth/authorize`));
    await page.click('button[value=allow]');
    const authorize = new URL((await nav).url());
    expect(authorize.searchParams.get('consent')).toBe('1');
    expect(authorize.searchParams.get('client_id')).toBe(clientId);
    expect(authorize.searchParams.get('redirect_uri')).toBe(REDIRECT);
    expect(authorize.searchParams.get('response_mode')).toBe('code');

    const resumed = await t.app.inject({ method: 'POST', url: '/oauth/idp/resume', payload: { ...params, session: pending.session, consent: '1' } });
    expect(resumed.statusCode).toBe(200);
    expect(resumed.json()).toMatchObject({ status: 'ok', response_mode: 'code', state: 'st-3' });
    const token = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ grant_type: 'authorization_code', code: resumed.json().code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier }).toString(),
    });
    expect(token.statusCode).toBe(200);
    expect(token.json().access_token).toBeTypeOf('string');
    // The used ticket renders the error page.
    expect((await t.app.inject(hostedUrl.slice(base.length))).statusCode).toBe(400);
    const bad = await t.app.inject({ method: 'POST', url: '/oauth/idp/resume', payload: { ...params, session: 'not.a.jwt' } });
    expect(bad.json().code).toBe('invalid_token');
    await page.context().close();
  });

  it('path A with a real idp_code from the provider', async () => {
    const user = await makeUser(t.app);
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: 'hank-sub', email: null, createdAt: t.clock.now() });
    const { verifier, challenge } = pkce();
    const page = await newPage();
    const authUrl = new URL(`${p.issuer}/auth`);
    for (const [k, v] of Object.entries({ client_id: p.clientId, response_type: 'code', scope: 'openid', redirect_uri: `${base}/idp-test-cb`, code_challenge: challenge, code_challenge_method: 'S256', state: 'x', nonce: 'n' })) authUrl.searchParams.set(k, v);
    await page.goto(authUrl.toString());
    await providerLogin(page, 'hank-sub');
    await page.waitForURL((url) => url.pathname === '/idp-test-cb');
    const idpCode = new URL(page.url()).searchParams.get('code')!;
    const ex = await t.app.inject({
      method: 'POST',
      url: '/oauth/idp/exchange',
      payload: { client_id: clientId, redirect_uri: REDIRECT, idp_code: idpCode, idp_redirect_uri: `${base}/idp-test-cb`, idp_code_verifier: verifier, nonce: 'n' },
    });
    expect(ex.statusCode).toBe(200);
    expect(ex.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    // The same code again is refused by the provider.
    const again = await t.app.inject({
      method: 'POST',
      url: '/oauth/idp/exchange',
      payload: { client_id: clientId, redirect_uri: REDIRECT, idp_code: idpCode, idp_redirect_uri: `${base}/idp-test-cb`, idp_code_verifier: verifier },
    });
    expect(again.json().code).toBe('invalid_idp_code');
    await page.context().close();
  });

  it('callback with an unknown or replayed state renders a 400 page and signs nobody in', async () => {
    const res = await t.app.inject('/oauth/idp/callback?code=abc&state=st_unknown');
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    const start = await t.app.inject(`/oauth/idp/start?client_id=${clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}`);
    expect(start.statusCode).toBe(302);
    const cookie = start.headers['set-cookie'] as string;
    expect(cookie).toMatch(/HttpOnly/i);
    expect(cookie).toMatch(/SameSite=Lax/i);
    const at = new URL(start.headers.location as string);
    expect(at.searchParams.get('code_challenge_method')).toBe('S256');
    expect(at.searchParams.get('nonce')).toBeTruthy();
    const state = at.searchParams.get('state')!;
    // Another browser (no binder cookie) cannot use the state.
    const foreign = await t.app.inject(`/oauth/idp/callback?code=abc&state=${encodeURIComponent(state)}`);
    expect(foreign.statusCode).toBe(400);
    expect(foreign.headers.location).toBeUndefined();
  });
});
