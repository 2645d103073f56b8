import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { setAppUserStatus } from '../../src/storage/repos/app-users.js';
import { findUserByEmail, updateUser } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import {
  authorizeAndGetCode,
  authorizeUrl,
  Browser,
  exchangeCode,
  makeClient,
  pkcePair,
  relative,
  type TestClient,
} from '../helpers/oauth-flows.js';

const ISS = 'https://auth.test';

/** An error page: HTML 4xx with no Location header (docs/security/checklist.md). */
function expectErrorPage(res: { statusCode: number; headers: Record<string, unknown>; body: string }) {
  expect(res.statusCode).toBeGreaterThanOrEqual(400);
  expect(res.statusCode).toBeLessThan(500);
  expect(res.headers.location).toBeUndefined();
  expect(String(res.headers['content-type'])).toMatch(/text\/html/);
}

function redirectError(res: { statusCode: number; headers: Record<string, unknown> }, base: string) {
  expect(res.statusCode).toBe(302);
  const location = String(res.headers.location);
  expect(location.startsWith(base)).toBe(true);
  return new URL(location).searchParams;
}

describe('GET /oauth/authorize', () => {
  let t: TestApp;
  let appA: TestClient;
  let appC: TestClient;
  let alice: Browser;

  beforeAll(async () => {
    t = await buildTestApp({ env: { BASE_URL: ISS } });
    appA = await makeClient(t, { redirectUris: ['https://a.example/cb/', 'com.example.a:/oauth2redirect', 'http://127.0.0.1/cb'] });
    appC = await makeClient(t, { type: 'confidential', redirectUris: ['https://c.example/cb?env=prod'] });
    alice = new Browser(t.app);
    await alice.register();
  });
  afterAll(async () => t.close());

  const authz = (client: TestClient, redirectUri: string, extra: Record<string, string> = {}) =>
    `/oauth/authorize?${new URLSearchParams({
      response_type: 'code',
      client_id: client.app.id,
      redirect_uri: redirectUri,
      state: 'st1',
      scope: 'openid profile',
      code_challenge: pkcePair().challenge,
      code_challenge_method: 'S256',
      ...extra,
    })}`;

  describe('redirect URI validation (docs/security/checklist.md#redirect-uris-and-open-redirects)', () => {
    it.each(['https://a.example/cb', 'https://a.example/cb//', 'https://a.example/cb/x'])('item 1: exact match, %s is refused', async (uri) => {
      const res = await alice.get(authz(appA, uri));
      expectErrorPage(res);
    });

    it('item 1 control: the registered URI (trailing slash) completes with code, state and iss', async () => {
      const { location } = await authorizeAndGetCode(alice, appA, { redirectUri: 'https://a.example/cb/', scope: 'openid profile' });
      expect(location).toMatch(/^https:\/\/a\.example\/cb\/\?code=[^&]+&state=st1&iss=https%3A%2F%2Fauth\.test$/);
    });

    it.each([
      'HTTPS://a.example/cb/',
      'https://A.EXAMPLE/cb/',
      'https://a.example/CB/',
      'https://a.example:443/cb/',
      'https://a.example./cb/',
      'https://a.example/cb/%2e%2e/cb/',
      'https://a.example/x/../cb/',
      'https://a.example/cb%2F',
      'https://a.example/cb/%252E%252E/',
      'https://xn--a-lookalike.example/cb/',
    ])('item 2: no normalisation, %s is refused', async (uri) => {
      expectErrorPage(await alice.get(authz(appA, uri)));
    });

    it.each(['https://a.example/cb/?x=1'])('item 3a: an added query is refused (%s)', async (uri) => {
      expectErrorPage(await alice.get(authz(appA, uri)));
    });

    it.each(['https://c.example/cb?env=prod&x=1', 'https://c.example/cb?x=1&env=prod', 'https://c.example/cb?env=pro', 'https://c.example/cb'])(
      'item 3b: query must match exactly (%s)',
      async (uri) => {
        expectErrorPage(await alice.get(authz(appC, uri)));
      },
    );

    it('item 3c: the registered query is kept when the code is appended', async () => {
      const { location } = await authorizeAndGetCode(alice, appC, { redirectUri: 'https://c.example/cb?env=prod', scope: 'openid profile' });
      expect(location).toMatch(/^https:\/\/c\.example\/cb\?env=prod&code=[^&]+&state=st1&iss=/);
    });

    it.each(['https://a.example/cb#f', 'javascript:alert(1)', 'data:text/html,<script>', 'file://test', 'http://a.example/cb'])(
      'item 4: unregistered dangerous URI %s is refused at authorize',
      async (uri) => {
        expectErrorPage(await alice.get(authz(appA, uri)));
      },
    );

    it('item 4: custom schemes work only when registered exactly', async () => {
      const ok = await authorizeAndGetCode(alice, appA, { redirectUri: 'com.example.a:/oauth2redirect', scope: 'openid profile' });
      expect(ok.location.startsWith('com.example.a:/oauth2redirect?code=')).toBe(true);
      expectErrorPage(await alice.get(authz(appA, 'com.example.a:/oauth2redirectX')));
    });

    it.each([
      'https://a.example@evil.example/cb/',
      'https://evil.example#@a.example/cb/',
      'https://a.example.evil.example/cb/',
      'https://a.example\\@evil.example/cb/',
      '//evil.example/cb/',
      'https:/\\evil.example',
      'https://a.example/cb/%0d%0aLocation:%20https://evil.example',
      'https://a.example/cb/\r\nLocation: https://evil.example',
      'https://a.example/cb/%00',
    ])('item 5: parser-confusion payload %j is refused without echoing evil.example in headers', async (uri) => {
      const res = await alice.get(authz(appA, uri));
      expectErrorPage(res);
      for (const value of Object.values(res.headers)) expect(String(value)).not.toContain('evil.example');
    });

    it('item 6 (documented deviation): loopback redirect URIs need the exact port', async () => {
      expectErrorPage(await alice.get(authz(appA, 'http://127.0.0.1:51234/cb')));
      const ok = await authorizeAndGetCode(alice, appA, { redirectUri: 'http://127.0.0.1/cb', scope: 'openid profile' });
      expect(ok.location.startsWith('http://127.0.0.1/cb?code=')).toBe(true);
    });

    it('item 7a: no redirect_uri (several registered) → error page', async () => {
      const q = new URLSearchParams({ response_type: 'code', client_id: appA.app.id, state: 'st1', code_challenge: pkcePair().challenge, code_challenge_method: 'S256' });
      expectErrorPage(await alice.get(`/oauth/authorize?${q}`));
    });

    it('item 7a: no redirect_uri even with a single registered URI → error page', async () => {
      const q = new URLSearchParams({ response_type: 'code', client_id: appC.app.id, state: 'st1' });
      expectErrorPage(await alice.get(`/oauth/authorize?${q}`));
    });

    it('item 7b: unknown client → error page, never a redirect', async () => {
      const res = await alice.get(`/oauth/authorize?client_id=unknown&redirect_uri=${encodeURIComponent('https://evil.example/')}&response_type=code`);
      expectErrorPage(res);
      expect(res.body).not.toContain('evil.example');
    });

    it('a disabled app → error page', async () => {
      const disabled = await makeClient(t, { disabled: true });
      expectErrorPage(await alice.get(authz(disabled, 'https://a.example/cb/')));
    });

    it('item 7c: later errors go back with state and iss', async () => {
      let p = redirectError(await alice.get(authz(appA, 'https://a.example/cb/', { scope: 'not-a-scope' })), 'https://a.example/cb/?');
      expect(p.get('error')).toBe('invalid_scope');
      expect(p.get('state')).toBe('st1');
      expect(p.get('iss')).toBe(ISS);
      p = redirectError(await alice.get(authz(appA, 'https://a.example/cb/', { response_type: 'token' })), 'https://a.example/cb/?');
      expect(p.get('error')).toBe('unsupported_response_type');
      expect(p.get('state')).toBe('st1');
      expect(p.get('iss')).toBe(ISS);
    });
  });

  describe('PKCE at authorize (docs/security/checklist.md#pkce)', () => {
    it('item 10: a public app without code_challenge gets invalid_request', async () => {
      const { url } = authorizeUrl(appA, { pkce: null });
      const p = redirectError(await alice.get(url), 'https://a.example/cb/');
      expect(p.get('error')).toBe('invalid_request');
      expect(p.get('error_description')).toMatch(/code_challenge/);
    });

    it('item 10 policy: a confidential app may omit PKCE', async () => {
      const { location } = await authorizeAndGetCode(alice, appC, { redirectUri: 'https://c.example/cb?env=prod', pkce: null, scope: 'openid profile' });
      expect(new URL(location).searchParams.get('code')).toBeTruthy();
    });

    const challenge = pkcePair().challenge;
    it.each([
      ['plain', { code_challenge: challenge, code_challenge_method: 'plain' }],
      ['method omitted', { code_challenge: challenge }],
      ['S512', { code_challenge: challenge, code_challenge_method: 'S512' }],
      ['42 chars', { code_challenge: challenge.slice(0, 42), code_challenge_method: 'S256' }],
      ['44 chars', { code_challenge: `${challenge}A`, code_challenge_method: 'S256' }],
      ['+/= chars', { code_challenge: `${challenge.slice(0, 40)}+/=`, code_challenge_method: 'S256' }],
      ['method without challenge', { code_challenge_method: 'S256' }],
    ])('item 11: %s → invalid_request', async (_name, pkce) => {
      const q = new URLSearchParams({ response_type: 'code', client_id: appA.app.id, redirect_uri: 'https://a.example/cb/', state: 'st1', ...pkce });
      const p = redirectError(await alice.get(`/oauth/authorize?${q}`), 'https://a.example/cb/');
      expect(p.get('error')).toBe('invalid_request');
    });

    it('item 15: the code_challenge is not echoed anywhere', async () => {
      const pkce = pkcePair();
      const { url } = authorizeUrl(appA, { pkce });
      const res = await alice.get(url);
      expect(JSON.stringify(res.headers)).not.toContain(pkce.challenge);
      expect(res.body).not.toContain(pkce.challenge);
      expect(t.logs.join('\n')).not.toContain(pkce.challenge);
    });
  });

  describe('parameters (docs/security/checklist.md#authorization-codes-and-the-authorize-endpoint)', () => {
    it.each(['client_id', 'redirect_uri'])('item 22a: duplicated %s → error page', async (name) => {
      const url = authz(appA, 'https://a.example/cb/');
      const value = new URLSearchParams(url.split('?')[1]).get(name)!;
      expectErrorPage(await alice.get(`${url}&${name}=${encodeURIComponent(value)}`));
    });

    it.each(['state', 'code_challenge', 'scope'])('item 22a: duplicated %s → invalid_request', async (name) => {
      const url = authz(appA, 'https://a.example/cb/');
      const value = new URLSearchParams(url.split('?')[1]).get(name)!;
      const p = redirectError(await alice.get(`${url}&${name}=${encodeURIComponent(value)}`), 'https://a.example/cb/');
      expect(p.get('error')).toBe('invalid_request');
      expect(p.get('code')).toBeNull();
    });

    it('item 22b: unknown parameters are ignored', async () => {
      const { location } = await authorizeAndGetCode(alice, appA, { scope: 'openid profile', extra: { foo: 'bar' } });
      expect(new URL(location).searchParams.get('code')).toBeTruthy();
    });

    it.each([['token'], ['id_token token']])('item 21: response_type=%s → unsupported_response_type', async (rt) => {
      const p = redirectError(await alice.get(authz(appA, 'https://a.example/cb/', { response_type: rt })), 'https://a.example/cb/');
      expect(p.get('error')).toBe('unsupported_response_type');
    });

    it('item 21: response_type missing → invalid_request', async () => {
      const url = authz(appA, 'https://a.example/cb/').replace('response_type=code&', '');
      const p = redirectError(await alice.get(url), 'https://a.example/cb/');
      expect(p.get('error')).toBe('invalid_request');
    });

    it('docs/reference/oauth.md#endpoints: a signed-out browser with a bad scope gets the error redirect, not the login page', async () => {
      const stranger = new Browser(t.app);
      const p = redirectError(await stranger.get(authz(appA, 'https://a.example/cb/', { scope: 'openid admin' })), 'https://a.example/cb/');
      expect(p.get('error')).toBe('invalid_scope');
      const { url } = authorizeUrl(appA, { pkce: null });
      expect(redirectError(await stranger.get(url), 'https://a.example/cb/').get('error')).toBe('invalid_request');
    });

    it('the default scope is openid profile email', async () => {
      const b = new Browser(t.app);
      await b.register();
      const { code, verifier } = await authorizeAndGetCode(b, appA, { scope: '' });
      const res = await exchangeCode(t.app, appA, code, verifier);
      expect(res.json().scope).toBe('email openid profile');
    });

    it('item 24: state comes back byte-identical, with iss, on success and error', async () => {
      for (const state of ['a b+c&d', 'x'.repeat(1000), 'ü/?#%']) {
        const { location } = await authorizeAndGetCode(alice, appA, { state, scope: 'openid profile' });
        const p = new URL(location).searchParams;
        expect(p.get('state')).toBe(state);
        expect(p.get('iss')).toBe(ISS);
        expect(location).not.toContain('#');
        const err = redirectError(await alice.get(authz(appA, 'https://a.example/cb/', { state, scope: 'bogus' })), 'https://a.example/cb/');
        expect(err.get('state')).toBe(state);
        expect(err.get('iss')).toBe(ISS);
      }
    });

    it('no state sent → none returned', async () => {
      const url = authz(appA, 'https://a.example/cb/').replace('state=st1&', '');
      const res = await alice.get(url);
      const location = String(res.headers.location);
      expect(new URL(location).searchParams.has('state')).toBe(false);
    });

    it('item 9b: no CORS headers on authorize, even for a preflight', async () => {
      const res = await alice.get(authz(appA, 'https://a.example/cb/'), { origin: 'https://a.example' });
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
      const pre = await t.app.inject({ method: 'OPTIONS', url: '/oauth/authorize', headers: { origin: 'https://a.example', 'access-control-request-method': 'GET' } });
      expect(pre.headers['access-control-allow-origin']).toBeUndefined();
    });

    it('responses carry no-store', async () => {
      const res = await alice.get(authz(appA, 'https://a.example/cb/'));
      expect(res.headers['cache-control']).toBe('no-store');
    });
  });

  describe('sign-in, consent and profile steps', () => {
    it('a signed-out browser goes to the login page and comes back after sign-in (303)', async () => {
      const b = new Browser(t.app);
      const user = await new Browser(t.app).register();
      const { url } = authorizeUrl(appA, { scope: 'openid profile', extra: { login_hint: user.email, ui_locales: 'zh-CN' } });
      const res = await b.get(url);
      expect(res.statusCode).toBe(302);
      const login = String(res.headers.location);
      expect(login.startsWith(`${ISS}/login?`)).toBe(true);
      expect(new URL(login).searchParams.get('ui_locales')).toBe('zh-CN');
      const page = await b.get(relative(login));
      expect(page.body).toContain(`value="${user.email}"`);
      expect(page.body).toContain('lang="zh-CN"');
      const done = await b.submit(relative(login), { email: user.email, password: user.password, action: 'login' });
      expect(done.statusCode).toBe(303);
      expect(String(done.headers.location)).toBe(url.replace('login_hint', 'login_hint'));
      const next = await b.get(String(done.headers.location));
      expect(next.statusCode).toBe(302);
      expect(relative(String(next.headers.location))).toMatch(/^\/consent/);
    });

    it('item 23a: prompt=none without a session → login_required', async () => {
      const p = redirectError(await new Browser(t.app).get(authz(appA, 'https://a.example/cb/', { prompt: 'none' })), 'https://a.example/cb/');
      expect(p.get('error')).toBe('login_required');
      expect(p.get('state')).toBe('st1');
    });

    it('item 23b: prompt=none without consent → consent_required, no code', async () => {
      const fresh = await makeClient(t);
      const p = redirectError(await alice.get(authz(fresh, 'https://a.example/cb/', { prompt: 'none' })), 'https://a.example/cb/');
      expect(p.get('error')).toBe('consent_required');
      expect(p.get('code')).toBeNull();
    });

    it('prompt=none after consent → a code at once', async () => {
      const fresh = await makeClient(t);
      await authorizeAndGetCode(alice, fresh, { scope: 'openid profile' });
      const res = await alice.get(authz(fresh, 'https://a.example/cb/', { prompt: 'none' }));
      expect(new URL(String(res.headers.location)).searchParams.get('code')).toBeTruthy();
    });

    it('consent covers only the scopes granted: asking for more shows the page again', async () => {
      const fresh = await makeClient(t);
      await authorizeAndGetCode(alice, fresh, { scope: 'openid' });
      const res = await alice.get(authz(fresh, 'https://a.example/cb/', { scope: 'openid email' }));
      expect(relative(String(res.headers.location))).toMatch(/^\/consent/);
    });

    it('prompt=consent forces the consent page once, then completes', async () => {
      const fresh = await makeClient(t);
      await authorizeAndGetCode(alice, fresh, { scope: 'openid' });
      const res = await alice.get(authz(fresh, 'https://a.example/cb/', { scope: 'openid', prompt: 'consent' }));
      expect(relative(String(res.headers.location))).toMatch(/^\/consent/);
      const allowed = await alice.submit('/consent', { action: 'allow' });
      expect(allowed.statusCode).toBe(303);
      const back = await alice.get(String(allowed.headers.location));
      expect(new URL(String(back.headers.location)).searchParams.get('code')).toBeTruthy();
    });

    it('prompt=login sends a signed-in user to the login page', async () => {
      const res = await alice.get(authz(appA, 'https://a.example/cb/', { prompt: 'login' }));
      expect(String(res.headers.location)).toMatch(/\/login\?/);
    });

    it('Deny → access_denied back to the app with state and iss; consent.granted recorded on Allow', async () => {
      const fresh = await makeClient(t);
      const res = await alice.get(authz(fresh, 'https://a.example/cb/'));
      expect(relative(String(res.headers.location))).toMatch(/^\/consent/);
      const denied = await alice.submit('/consent', { action: 'deny' });
      expect(denied.statusCode).toBe(303);
      const p = new URL(String(denied.headers.location)).searchParams;
      expect(String(denied.headers.location).startsWith('https://a.example/cb/?')).toBe(true);
      expect(p.get('error')).toBe('access_denied');
      expect(p.get('state')).toBe('st1');
      expect(p.get('iss')).toBe(ISS);
      await authorizeAndGetCode(alice, fresh, { scope: 'openid profile' });
      const events = await t.db.selectFrom('events').selectAll().where('type', '=', 'consent.granted').where('app_id', '=', fresh.app.id).execute();
      expect(events).toHaveLength(1);
      expect(JSON.parse(events[0]!.data)).toEqual({ via: 'consent_page', scope: 'openid profile' });
    });

    it('item 23d: the grant covers only the scopes shown, whatever the POST carries', async () => {
      const fresh = await makeClient(t);
      await alice.get(authz(fresh, 'https://a.example/cb/', { scope: 'openid' }));
      const page = await alice.get('/consent');
      expect(page.body).toContain('data-scope="openid"');
      expect(page.body).not.toContain('data-scope="email"');
      const csrf = /name="csrf" value="([^"]+)"/.exec(page.body)![1]!;
      await alice.post('/consent', { csrf, action: 'allow', scope: 'openid email profile offline_access' });
      const consent = await t.db.selectFrom('consents').selectAll().where('app_id', '=', fresh.app.id).executeTakeFirst();
      expect(consent?.scope).toBe('openid');
    });

    it('item 58a: the consent page shows the app name escaped, who you are first, the fields the app will ask for and where you return, never a raw id', async () => {
      const evil = await makeClient(t, { name: '<img src=x onerror=alert(1)>', requiredFields: ['phone_number', 'birthdate'] });
      await alice.get(authz(evil, 'https://a.example/cb/', { scope: 'email profile openid' }));
      const page = await alice.get('/consent');
      expect(page.body).not.toContain('<img src=x');
      expect(page.body).toContain('&lt;img src=x');
      expect(page.body).not.toContain(evil.app.id);
      expect([...page.body.matchAll(/data-scope="([^"]+)"/g)].map((m) => m[1])).toEqual(['openid', 'profile', 'email']);
      expect(page.body).toMatch(/data-consent-fields>[^<]*Phone number, Date of birth/);
      expect(page.body).toContain('return to a.example');
    });

    it('"Not you?" on the consent page signs out and asks who is signing in, for the same authorization request', async () => {
      const fresh = await makeClient(t);
      const bob = new Browser(t.app);
      await bob.register();
      await bob.get(authz(fresh, 'https://a.example/cb/', { state: 'keep-me' }));
      const switched = await bob.submit('/consent', { action: 'switch_account' });
      expect(switched.statusCode).toBe(303);
      const again = new URL(String(switched.headers.location), 'http://x');
      expect(again.pathname).toBe('/oauth/authorize');
      expect(again.searchParams.get('prompt')).toBe('login');
      expect(again.searchParams.get('state')).toBe('keep-me');
      expect(bob.sessionCookie()).toBeUndefined();
      const login = await bob.get(relative(String(switched.headers.location)));
      expect(relative(String(login.headers.location))).toMatch(/^\/login/);
      // Nothing was consented to on the way out.
      expect(await t.db.selectFrom('consents').select('scope').where('app_id', '=', fresh.app.id).execute()).toEqual([]);
    });

    it('required profile data: the profile page collects it, then the code is issued', async () => {
      const strict = await makeClient(t, { requiredFields: ['phone_number', 'birthdate'] });
      const b = new Browser(t.app);
      await b.register();
      const first = await b.get(authz(strict, 'https://a.example/cb/'));
      expect(relative(String(first.headers.location))).toMatch(/^\/consent/);
      const allowed = await b.submit('/consent', { action: 'allow' });
      const second = await b.get(String(allowed.headers.location));
      expect(relative(String(second.headers.location))).toMatch(/^\/profile/);
      const bad = await b.submit('/profile', { phone_number: '12345', birthdate: '1990-01-01', action: 'save' });
      expect(bad.statusCode).toBe(400);
      expect(bad.body).toContain('international format');
      const saved = await b.submit('/profile', { phone_number: '+14155550123', birthdate: '1990-01-01', action: 'save' });
      expect(saved.statusCode).toBe(303);
      const done = await b.get(String(saved.headers.location));
      expect(new URL(String(done.headers.location)).searchParams.get('code')).toBeTruthy();
    });

    it('an app requiring a verified email links to /verify-email', async () => {
      const strict = await makeClient(t, { requiredFields: ['email_verified'] });
      const b = new Browser(t.app);
      await b.register();
      await b.get(authz(strict, 'https://a.example/cb/'));
      const allowed = await b.submit('/consent', { action: 'allow' });
      const second = await b.get(String(allowed.headers.location));
      const page = await b.get(relative(String(second.headers.location)));
      expect(page.body).toContain('href="/verify-email"');
    });

    it('a user blocked for the app, or disabled, gets access_denied', async () => {
      const fresh = await makeClient(t);
      const b = new Browser(t.app);
      const { email } = await b.register();
      await authorizeAndGetCode(b, fresh, { scope: 'openid' });
      const user = (await findUserByEmail(t.db, email))!;
      await setAppUserStatus(t.db, fresh.app.id, user.id, 'blocked');
      let p = redirectError(await b.get(authz(fresh, 'https://a.example/cb/', { scope: 'openid' })), 'https://a.example/cb/');
      expect(p.get('error')).toBe('access_denied');
      await setAppUserStatus(t.db, fresh.app.id, user.id, 'active');
      await updateUser(t.db, user.id, { status: 'disabled' });
      p = redirectError(await b.get(authz(fresh, 'https://a.example/cb/', { scope: 'openid' })), 'https://a.example/cb/');
      expect(p.get('error')).toBe('access_denied');
    });

    it('an app without the Auth feature → unauthorized_client', async () => {
      const noAuth = await makeClient(t, { features: { auth: false, profile: false } });
      const p = redirectError(await alice.get(authz(noAuth, 'https://a.example/cb/')), 'https://a.example/cb/');
      expect(p.get('error')).toBe('unauthorized_client');
    });

    it('the session parameter signs in with a session JWT for this app, never an access token', async () => {
      const b = new Browser(t.app);
      await b.register();
      const { code, verifier } = await authorizeAndGetCode(b, appA, { scope: 'openid profile' });
      const tokens = (await exchangeCode(t.app, appA, code, verifier)).json();
      const grant = await t.db.selectFrom('grants').select(['id', 'user_id']).orderBy('created_at', 'desc').orderBy('id', 'desc').executeTakeFirstOrThrow();
      const session = await t.app.tokens.mintSession({ userId: grant.user_id, appId: appA.app.id, grantId: grant.id });
      const stranger = new Browser(t.app);
      const ok = await stranger.get(authz(appA, 'https://a.example/cb/', { session, prompt: 'none', scope: 'openid profile' }));
      expect(new URL(String(ok.headers.location)).searchParams.get('code')).toBeTruthy();
      // An access token is not a session: not signed in.
      const no = await stranger.get(authz(appA, 'https://a.example/cb/', { session: tokens.access_token, prompt: 'none' }));
      expect(new URL(String(no.headers.location)).searchParams.get('error')).toBe('login_required');
      // A session JWT for another app is not accepted either.
      const other = await makeClient(t);
      const foreign = await stranger.get(authz(other, 'https://a.example/cb/', { session, prompt: 'none' }));
      expect(new URL(String(foreign.headers.location)).searchParams.get('error')).toBe('login_required');
    });
  });
});
