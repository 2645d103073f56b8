import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { authorizeAndGetCode, authorizeUrl, Browser, csrfOf, makeClient, PASSWORD, relative, type TestClient } from '../helpers/oauth-flows.js';

describe('hosted login, register, consent and logout pages (docs/security/checklist.md#sessions-cookies-and-csrf)', () => {
  let t: TestApp;
  let appA: TestClient;

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeClient(t, { name: 'Alpha App' });
  });
  afterAll(async () => t.close());

  it('the login page has the stable hooks of docs/guides/hosted-pages.md#stable-hooks and the app name', async () => {
    const b = new Browser(t.app);
    await b.get(authorizeUrl(appA).url);
    const page = await b.get(`/login?client_id=${appA.app.id}`);
    expect(page.statusCode).toBe(200);
    for (const hook of ['name="email"', 'name="password"', 'name="action" value="login"', 'name="action" value="send_magic_link"', 'name="csrf"']) {
      expect(page.body).toContain(hook);
    }
    expect(page.body).toContain('Alpha App');
    expect(page.body).toContain('href="/password/forgot');
    expect(page.body).not.toContain('value="idp"');
  });

  it('the register page has the hooks; terms checkbox only when the platform documents are published', async () => {
    const b = new Browser(t.app);
    const page = await b.get('/register');
    for (const hook of ['name="email"', 'name="password"', 'name="name"', 'name="action" value="register"']) expect(page.body).toContain(hook);
    expect(page.body).not.toContain('name="accept_terms"');
  });

  it('wrong password re-renders the form with 401 and one message; no redirect', async () => {
    const b = new Browser(t.app);
    const { email } = await b.register();
    const other = new Browser(t.app);
    const res = await other.login(email, 'wrong password here');
    expect(res.statusCode).toBe(401);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toContain('The email or password is incorrect.');
    expect(res.body).toContain(`value="${email}"`);
    const unknown = await other.login('nobody@example.com', 'wrong password here');
    expect(unknown.statusCode).toBe(401);
  });

  it('registration errors re-render the form (409 email taken, 400 weak password)', async () => {
    const b = new Browser(t.app);
    const { email } = await b.register();
    const again = await new Browser(t.app).submit('/register', { email, password: PASSWORD, action: 'register' });
    expect(again.statusCode).toBe(409);
    expect(again.body).toContain('already exists');
    const weak = await new Browser(t.app).submit('/register', { email: 'weak@example.com', password: 'password', action: 'register' });
    expect(weak.statusCode).toBe(400);
  });

  it('item 52: the session cookie is HttpOnly, SameSite=Lax, Path=/, and holds no PII', async () => {
    const res = await t.app.inject('/login');
    const cookies = res.cookies as Array<{ name: string; value: string; httpOnly?: boolean; sameSite?: string; path?: string; domain?: string }>;
    expect(cookies).toHaveLength(1);
    const c = cookies[0]!;
    expect(c.name).toBe('gh_sid');
    expect(c.httpOnly).toBe(true);
    expect(c.sameSite).toBe('Lax');
    expect(c.path).toBe('/');
    expect(c.domain).toBeUndefined();
    expect(c.value).toMatch(/^bs_[A-Za-z0-9_-]{43}$/);
  });

  it('item 52: over https the cookie is __Host-gh_sid and Secure', async () => {
    const s = await buildTestApp({ env: { BASE_URL: 'https://auth.test' } });
    try {
      const res = await s.app.inject('/login');
      const c = (res.cookies as Array<{ name: string; secure?: boolean }>)[0]!;
      expect(c.name).toBe('__Host-gh_sid');
      expect(c.secure).toBe(true);
      expect(res.headers['strict-transport-security']).toContain('max-age=31536000');
    } finally {
      await s.close();
    }
  });

  it('item 53: the session id changes at sign-in and the old id is no longer valid', async () => {
    const registrar = new Browser(t.app);
    const { email } = await registrar.register();
    const b = new Browser(t.app);
    await b.get(authorizeUrl(appA).url);
    const s0 = b.sessionCookie()!;
    const res = await b.login(email);
    expect(res.statusCode).toBe(303);
    const s1 = b.sessionCookie()!;
    expect(s1).not.toBe(s0);
    // Replaying S0: not signed in (authorize with prompt=none → login_required).
    const replay = await t.app.inject({ url: authorizeUrl(appA, { extra: { prompt: 'none' } }).url, headers: { cookie: `gh_sid=${s0}` } });
    expect(new URL(String(replay.headers.location)).searchParams.get('error')).toBe('login_required');
  });

  describe('item 55: CSRF on every hosted form', () => {
    let b: Browser;
    beforeAll(async () => {
      b = new Browser(t.app);
      await b.register();
      await b.get(authorizeUrl(appA).url);
    });

    it('consent POST without a token, with another session’s token, from another origin, or as text/plain → 403, nothing granted', async () => {
      const page = await b.get('/consent');
      const csrf = csrfOf(page.body);
      const other = new Browser(t.app);
      const otherCsrf = csrfOf((await other.get('/login')).body);
      const attempts = [
        await b.post('/consent', { action: 'allow' }),
        await b.post('/consent', { action: 'allow', csrf: otherCsrf }),
        await b.post('/consent', { action: 'allow', csrf }, { origin: 'https://evil.example' }),
        await t.app.inject({ method: 'POST', url: '/consent', headers: { ...b.jar.header(), 'content-type': 'text/plain' }, payload: `action=allow&csrf=${csrf}` }),
      ];
      for (const res of attempts) {
        expect(res.statusCode).toBe(403);
        expect(res.headers['content-type']).toMatch(/text\/html/);
      }
      const consent = await t.db.selectFrom('consents').selectAll().where('app_id', '=', appA.app.id).execute();
      expect(consent).toHaveLength(0);
    });

    it('login, register, profile and logout POSTs without the token → 403', async () => {
      for (const url of ['/login', '/register', '/profile', '/oauth/logout']) {
        const res = await b.post(url, { email: 'x@example.com', password: PASSWORD, action: 'login' });
        expect(res.statusCode, url).toBe(403);
      }
    });
  });

  it('item 56: hosted pages cannot be framed and leak no referrer', async () => {
    const b = new Browser(t.app);
    await b.register();
    await b.get(authorizeUrl(appA).url);
    for (const url of ['/login', '/register', '/consent', '/oauth/logout']) {
      const res = await b.get(url);
      expect(res.statusCode, url).toBe(200);
      expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
      expect(res.headers['content-security-policy']).not.toContain('unsafe-inline');
      expect(res.headers['x-frame-options']).toBe('DENY');
      expect(res.headers['referrer-policy']).toBe('no-referrer');
      expect(res.headers['cache-control']).toBe('no-store');
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    }
  });

  it('an expired or missing pending step renders the error page, not a redirect', async () => {
    const b = new Browser(t.app);
    await b.register();
    const res = await b.get('/consent');
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    const profile = await b.get('/profile');
    expect(profile.statusCode).toBe(400);
  });

  it('another user cannot act on a pending consent of this browser after switching accounts', async () => {
    const b = new Browser(t.app);
    await b.register();
    await b.get(authorizeUrl(appA).url);
    const { email } = await new Browser(t.app).register();
    await b.login(email); // signs in as someone else in the same browser
    expect((await b.get('/consent')).statusCode).toBe(400);
  });

  describe('logout (item 54) and open redirects (item 8)', () => {
    it('a cross-site GET does not sign out: it shows a confirmation with a POST form', async () => {
      const b = new Browser(t.app);
      await b.register();
      const res = await b.get(`/oauth/logout?client_id=${appA.app.id}&post_logout_redirect_uri=${encodeURIComponent(appA.app.redirectUris[0]!)}&state=s9`);
      expect(res.statusCode).toBe(200);
      expect(res.body).toContain('name="action" value="logout"');
      // Still signed in.
      const { location } = await authorizeAndGetCode(b, appA);
      expect(location).toContain('code=');
      // POST with the CSRF token ends the session and goes to the whitelisted URI with state.
      const done = await b.post('/oauth/logout', { csrf: csrfOf(res.body), action: 'logout', client_id: appA.app.id, post_logout_redirect_uri: appA.app.redirectUris[0]!, state: 's9' });
      expect(done.statusCode).toBe(303);
      expect(done.headers.location).toBe(`${appA.app.redirectUris[0]}?state=s9`);
      const after = await b.get(authorizeUrl(appA, { extra: { prompt: 'none' } }).url);
      expect(new URL(String(after.headers.location)).searchParams.get('error')).toBe('login_required');
    });

    it('logout replay of the old cookie is not authenticated', async () => {
      const b = new Browser(t.app);
      await b.register();
      const cookie = b.sessionCookie()!;
      const page = await b.get('/oauth/logout');
      await b.post('/oauth/logout', { csrf: csrfOf(page.body), action: 'logout' });
      const replay = await t.app.inject({ url: authorizeUrl(appA, { extra: { prompt: 'none' } }).url, headers: { cookie: `gh_sid=${cookie}` } });
      expect(new URL(String(replay.headers.location)).searchParams.get('error')).toBe('login_required');
    });

    it.each(['https://evil.example', '//evil.example', '/\\evil.example', 'javascript:alert(1)', 'https:evil.example'])(
      'post_logout_redirect_uri=%s is never followed',
      async (target) => {
        const b = new Browser(t.app);
        await b.register();
        for (const url of [
          `/oauth/logout?post_logout_redirect_uri=${encodeURIComponent(target)}`,
          `/oauth/logout?client_id=${appA.app.id}&post_logout_redirect_uri=${encodeURIComponent(target)}`,
        ]) {
          const res = await b.get(url);
          expect(res.statusCode).toBe(400);
          expect(res.headers.location).toBeUndefined();
          expect(res.body).not.toContain('evil.example');
        }
        const signedOut = await new Browser(t.app).get(`/oauth/logout?client_id=${appA.app.id}&post_logout_redirect_uri=${encodeURIComponent(target)}`);
        expect(signedOut.headers.location).toBeUndefined();
      },
    );

    it.each(['next', 'return_to', 'redirect'])('login ignores a %s parameter', async (param) => {
      const registrar = new Browser(t.app);
      const { email } = await registrar.register();
      const b = new Browser(t.app);
      await b.get(`/login?${param}=https://evil.example`);
      const page = await b.get(`/login?${param}=https://evil.example`);
      expect(page.body).not.toContain('evil.example');
      const res = await b.post(`/login?${param}=https://evil.example`, { csrf: csrfOf(page.body), email, password: PASSWORD, action: 'login' });
      expect(res.statusCode).toBe(303);
      expect(String(res.headers.location)).not.toContain('evil');
      expect(relative(String(res.headers.location))).toBe('/account');
    });
  });
});

describe('login page with a provider configured', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IDP_ISSUER: 'http://127.0.0.1:9', IDP_CLIENT_ID: 'gatehouse', IDP_NAME: 'Acme <ID>' } });
  });
  afterAll(async () => t.close());

  it('offers "Continue with {IDP_NAME}" carrying the authorization request to /oauth/idp/start', async () => {
    const client = await makeClient(t);
    const b = new Browser(t.app);
    const { url } = authorizeUrl(client, { state: 'st-idp', extra: { nonce: 'n-1' } });
    await b.get(url);
    const page = await b.get(`/login?client_id=${client.app.id}`);
    expect(page.body).toContain('action="/oauth/idp/start"');
    expect(page.body).toContain('name="action" value="idp"');
    expect(page.body).toContain('Continue with Acme &lt;ID&gt;');
    for (const [name, value] of [['client_id', client.app.id], ['redirect_uri', client.app.redirectUris[0]!], ['state', 'st-idp'], ['nonce', 'n-1'], ['response_mode', 'code']]) {
      expect(page.body).toContain(`name="${name}" value="${value}"`);
    }
    // Without an authorization request in flight there is nothing to continue.
    const plain = await new Browser(t.app).get('/login');
    expect(plain.body).not.toContain('value="idp"');
  });

  it('a successful hosted login records user.login_succeeded with the app', async () => {
    const client = await makeClient(t);
    const { email } = await new Browser(t.app).register();
    const b = new Browser(t.app);
    await b.get(authorizeUrl(client).url);
    expect((await b.login(email)).statusCode).toBe(303);
    const events = await t.db.selectFrom('events').selectAll().where('type', '=', 'user.login_succeeded').where('app_id', '=', client.app.id).execute();
    expect(events).toHaveLength(1);
  });
});

describe('register page with published platform terms', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
    const now = t.clock.now();
    for (const docType of ['terms', 'privacy']) {
      await t.db.insertInto('legal_documents').values({ owner: 'platform', doc_type: docType, default_lang: 'en', created_at: now, updated_at: now }).execute();
      await t.db
        .insertInto('legal_versions')
        .values({ id: `lv_${docType}`, owner: 'platform', doc_type: docType, lang: 'en', version: 1, title: docType, content: 'x', content_html: '<p>x</p>', created_at: now })
        .execute();
    }
  });
  afterAll(async () => t.close());

  it('requires accept_terms and records the acceptances', async () => {
    const b = new Browser(t.app);
    const page = await b.get('/register');
    expect(page.body).toContain('name="accept_terms"');
    expect(page.body).toContain('href="/legal/platform/terms"');
    expect(page.body).toContain('href="/legal/platform/privacy"');
    const refused = await b.post('/register', { csrf: csrfOf(page.body), email: 'terms@example.com', password: PASSWORD, action: 'register' });
    expect(refused.statusCode).toBe(400);
    expect(refused.body).toContain('accept the terms');
    const ok = await b.post('/register', { csrf: csrfOf(refused.body), email: 'terms@example.com', password: PASSWORD, accept_terms: '1', action: 'register' });
    expect(ok.statusCode).toBe(303);
    const accepted = await t.db.selectFrom('legal_acceptances').select('doc_type').execute();
    expect(accepted.map((a) => a.doc_type).sort()).toEqual(['privacy', 'terms']);
  });
});

describe('item 54: browser sessions time out server-side', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('after the idle limit, prompt=none answers login_required', async () => {
    const client = await makeClient(t);
    const b = new Browser(t.app);
    await b.register();
    await authorizeAndGetCode(b, client);
    t.clock.advance(t.config.ttl.browserSessionIdle + 1);
    const res = await b.get(authorizeUrl(client, { extra: { prompt: 'none' } }).url);
    expect(new URL(String(res.headers.location)).searchParams.get('error')).toBe('login_required');
  });
});
