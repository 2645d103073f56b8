import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { findConsentedScope } from '../../src/storage/repos/consents.js';
import { findIdentity, insertIdentity } from '../../src/storage/repos/idp.js';
import { findUserById } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeAndGetCode, Browser, csrfOf, exchangeCode, makeClient, refresh, type TestClient } from '../helpers/oauth-flows.js';

/**
 * `/account` (docs/guides/hosted-pages.md#pages-sessions-and-headers, docs/guides/hosted-pages.md#stable-hooks, docs/security/checklist.md): sign-in, profile,
 * password change, connected apps, sessions, sign out, unbind, CSRF and escaping — black box through
 * `app.inject` with a cookie jar.
 */

const ISSUER = 'https://idp.test';
const NEW_PASSWORD = 'a brand new passphrase 2048';

describe('/account', () => {
  let t: TestApp;

  beforeAll(async () => {
    t = await buildTestApp({ env: { IDP_ISSUER: ISSUER, IDP_CLIENT_ID: 'gh', IDP_NAME: 'TestIdP', IP_AUTH_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  /** A browser signed in on the account page as a fresh user. */
  async function signedIn(user?: Awaited<ReturnType<typeof makeUser>>) {
    const u = user ?? (await makeUser(t.app));
    const b = new Browser(t.app);
    const res = await b.submit('/account', { email: u.email, password: u.password, action: 'login' });
    expect(res.statusCode).toBe(303);
    return { b, user: u };
  }

  /** Tokens for `client` through /oauth/authorize in the (signed-in) browser. */
  async function tokensFor(b: Browser, client: TestClient) {
    const { code, verifier, redirectUri } = await authorizeAndGetCode(b, client);
    const res = await exchangeCode(t.app, client, code, verifier, redirectUri);
    expect(res.statusCode).toBe(200);
    return res.json() as { refresh_token: string; access_token: string };
  }

  /** Posts one of the account page's forms (CSRF token from the page, like a browser). */
  async function send(b: Browser, url: string, form: Record<string, string>) {
    const page = await b.get('/account');
    return b.post(url, { csrf: csrfOf(page.body), ...form });
  }

  const eventsOf = (userId: string, type: string) =>
    t.db.selectFrom('events').select(['type', 'app_id', 'data']).where('user_id', '=', userId).where('type', '=', type).execute();

  const isSignInForm = (html: string) => html.includes('value="login"') && html.includes('name="password"') && !html.includes('value="logout"');

  it('signed out shows the sign-in form (with a CSRF field), no account data', async () => {
    const b = new Browser(t.app);
    const res = await b.get('/account');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(isSignInForm(res.body)).toBe(true);
    expect(csrfOf(res.body)).toBeTruthy();
    expect(res.body).not.toContain('action="/account/password"');
  });

  it('password sign-in rotates the session cookie; the old id is not authenticated', async () => {
    const user = await makeUser(t.app);
    const b = new Browser(t.app);
    const page = await b.get('/account');
    const s0 = b.sessionCookie();
    expect(s0).toBeTruthy();
    const res = await b.post('/account', { csrf: csrfOf(page.body), email: user.email, password: user.password, action: 'login' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/account');
    const s1 = b.sessionCookie();
    expect(s1).toBeTruthy();
    expect(s1).not.toBe(s0);
    const home = await b.get('/account');
    expect(home.body).toContain(user.email);
    expect(home.body).toContain('value="logout"');
    const replay = await t.app.inject({ url: '/account', headers: { cookie: `gh_sid=${s0}` } });
    expect(isSignInForm(replay.body)).toBe(true);
    expect(replay.body).not.toContain(user.email);
  });

  it('a wrong password re-renders the form with one message and signs nobody in', async () => {
    const user = await makeUser(t.app);
    const b = new Browser(t.app);
    const res = await b.submit('/account', { email: user.email, password: 'not the password', action: 'login' });
    expect(res.statusCode).toBe(401);
    expect(res.body).toContain('The email or password is incorrect.');
    expect(isSignInForm((await b.get('/account')).body)).toBe(true);
  });

  it('saves the profile; invalid values re-render with an error and change nothing', async () => {
    const { b, user } = await signedIn();
    const ok = await send(b, '/account/profile', { name: '  Zoë Example ', phone_number: '+14155550100', birthdate: '1990-02-03', action: 'save' });
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/account?done=profile');
    let row = await findUserById(t.db, user.id);
    expect(row).toMatchObject({ name: 'Zoë Example', phone_number: '+14155550100', birthdate: '1990-02-03' });
    const page = await b.get('/account?done=profile');
    expect(page.body).toContain('Your profile was saved.');
    expect(page.body).toContain('value="Zoë Example"');

    const bad: Array<[Record<string, string>, string]> = [
      [{ name: 'Other', phone_number: '4155550100', birthdate: '1990-02-03' }, 'international format'],
      [{ name: 'Other', phone_number: '+0 415 555 0100', birthdate: '1990-02-03' }, 'international format'],
      [{ name: 'Bad\u001b[31m', phone_number: '+14155550100', birthdate: '1990-02-03' }, '1–100 characters'],
      [{ name: 'Other', phone_number: '+14155550100', birthdate: '1990-02-30' }, 'valid date of birth'],
      [{ name: 'Other', phone_number: '+14155550100', birthdate: '2999-01-01' }, 'valid date of birth'],
      [{ name: 'Other', phone_number: '+14155550100', birthdate: '03/02/1990' }, 'valid date of birth'],
      [{ name: 'x'.repeat(101), phone_number: '+14155550100', birthdate: '1990-02-03' }, '1–100 characters'],
    ];
    for (const [form, message] of bad) {
      const res = await send(b, '/account/profile', { ...form, action: 'save' });
      expect(res.statusCode, JSON.stringify(form)).toBe(400);
      expect(res.headers['content-type']).toMatch(/text\/html/);
      expect(res.body).toContain(message);
      row = await findUserById(t.db, user.id);
      expect(row).toMatchObject({ name: 'Zoë Example', phone_number: '+14155550100', birthdate: '1990-02-03' });
    }
    // The one profile-data rule: spaces, dashes and brackets people type in a phone number are dropped.
    expect((await send(b, '/account/profile', { name: 'Zoë Example', phone_number: '+1 (415) 555-0100', birthdate: '1990-02-03', action: 'save' })).statusCode).toBe(303);
    expect(await findUserById(t.db, user.id)).toMatchObject({ phone_number: '+14155550100' });
    // Clearing a field is allowed.
    expect((await send(b, '/account/profile', { name: 'Zoë Example', phone_number: '', birthdate: '', action: 'save' })).statusCode).toBe(303);
    expect(await findUserById(t.db, user.id)).toMatchObject({ phone_number: null, birthdate: null });
  });

  it('change password: refused without the current password; with it, other sessions and refresh tokens die, this session stays', async () => {
    const client = await makeClient(t);
    const { b, user } = await signedIn();
    const tokens = await tokensFor(b, client);
    const other = (await signedIn(user)).b;
    const before = (await findUserById(t.db, user.id))!.password_hash;

    for (const current of ['', 'wrong password entirely']) {
      const res = await send(b, '/account/password', { password: current, new_password: NEW_PASSWORD, action: 'save' });
      expect(res.statusCode).toBe(403);
      expect(res.headers['content-type']).toMatch(/text\/html/);
      expect(res.body).toContain('The current password is incorrect.');
      expect((await findUserById(t.db, user.id))!.password_hash).toBe(before);
    }
    // A weak new password (policy, docs/reference/rest-api.md#passwords) is refused with the right password too.
    const weak = await send(b, '/account/password', { password: user.password, new_password: 'short', action: 'save' });
    expect(weak.statusCode).toBe(400);
    expect(weak.body).toContain('This password is too short: use at least 8 characters.');
    expect((await findUserById(t.db, user.id))!.password_hash).toBe(before);
    // Nothing was revoked by the refusals.
    expect((await other.get('/account')).body).toContain('value="logout"');
    const r1 = await refresh(t.app, client, tokens.refresh_token);
    expect(r1.statusCode).toBe(200);
    const rt: string = r1.json().refresh_token;

    const ok = await send(b, '/account/password', { password: user.password, new_password: NEW_PASSWORD, action: 'save' });
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/account?done=password');
    expect((await findUserById(t.db, user.id))!.password_hash).not.toBe(before);
    // A notification goes to the account's address; events record the change (no secrets in them).
    const mails = await t.db.selectFrom('outbox').select(['kind', 'to_address']).where('to_address', '=', user.email).execute();
    expect(mails.length).toBeGreaterThanOrEqual(1);
    const changed = await eventsOf(user.id, 'password.reset');
    expect(changed).toHaveLength(1);
    expect(JSON.stringify(changed[0])).not.toContain(NEW_PASSWORD);
    // This browser stays signed in; the other one is signed out server-side.
    const mine = await b.get('/account?done=password');
    expect(mine.body).toContain('value="logout"');
    expect(mine.body).toContain('Other sessions were signed out.');
    expect(isSignInForm((await other.get('/account')).body)).toBe(true);
    const dead = await refresh(t.app, client, rt);
    expect(dead.statusCode).toBe(400);
    expect(dead.json().error).toBe('invalid_grant');
    // The new password works, the old one does not.
    expect((await new Browser(t.app).submit('/account', { email: user.email, password: user.password, action: 'login' })).statusCode).toBe(401);
    expect((await new Browser(t.app).submit('/account', { email: user.email, password: NEW_PASSWORD, action: 'login' })).statusCode).toBe(303);
  });

  it('lists connected apps; revoking one kills its consent and refresh tokens only, with a consent.revoked event', async () => {
    const appA = await makeClient(t, { name: 'Alpha Notes' });
    const appB = await makeClient(t, { name: 'Beta Photos' });
    const { b, user } = await signedIn();
    const ta = await tokensFor(b, appA);
    const tb = await tokensFor(b, appB);
    const page = await b.get('/account');
    expect(page.body).toContain('Alpha Notes');
    expect(page.body).toContain('Beta Photos');
    expect(page.body).toContain(`name="client_id" value="${appB.app.id}"`);
    expect(await findConsentedScope(t.db, appB.app.id, user.id)).not.toBe('');

    const res = await b.post('/account/apps', { csrf: csrfOf(page.body), action: 'deny', client_id: appB.app.id });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/account?done=revoked');
    expect(await findConsentedScope(t.db, appB.app.id, user.id)).toBe('');
    const rb = await refresh(t.app, appB, tb.refresh_token);
    expect(rb.statusCode).toBe(400);
    expect(rb.json().error).toBe('invalid_grant');
    expect((await refresh(t.app, appA, ta.refresh_token)).statusCode).toBe(200);
    expect(await findConsentedScope(t.db, appA.app.id, user.id)).not.toBe('');
    const events = await eventsOf(user.id, 'consent.revoked');
    expect(events).toHaveLength(1);
    expect(events[0]!.app_id).toBe(appB.app.id);
    // The next authorization for app B asks for consent again.
    const again = await b.get(`/oauth/authorize?response_type=code&client_id=${appB.app.id}&redirect_uri=${encodeURIComponent(appB.app.redirectUris[0]!)}&scope=openid&state=s&code_challenge=${'a'.repeat(43)}&code_challenge_method=S256`);
    expect(String(again.headers.location ?? '')).toContain('/consent');
  });

  it('lists the browser sessions, marking this one', async () => {
    const { b, user } = await signedIn();
    await signedIn(user);
    const page = await b.get('/account');
    // The "Where you're signed in" section (test/sessions/sessions-page.test.ts tests it in depth).
    const items = page.body.match(/class="item" data-session="ses_/g) ?? [];
    expect(items).toHaveLength(2);
    expect(page.body.match(/data-current/g)).toHaveLength(1);
    expect(page.body.match(/>This browser</g)).toHaveLength(1);
  });

  it('sign out ends the session server-side: replaying the old cookie shows the sign-in form', async () => {
    const { b, user } = await signedIn();
    const sid = b.sessionCookie()!;
    const page = await b.get('/account');
    const res = await b.post('/account', { csrf: csrfOf(page.body), action: 'logout' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/account?done=signed_out');
    const replay = await t.app.inject({ url: '/account', headers: { cookie: `gh_sid=${sid}` } });
    expect(isSignInForm(replay.body)).toBe(true);
    expect(replay.body).not.toContain(user.email);
    // A cross-site GET does not sign anyone out.
    const other = (await signedIn()).b;
    await other.get('/account?action=logout');
    expect((await other.get('/account')).body).toContain('value="logout"');
  });

  it('unbind removes the provider identity and records idp.unbound', async () => {
    const { b, user } = await signedIn();
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: ISSUER, subject: `sub-${user.id}`, email: 'me@idp.test', createdAt: t.clock.now() });
    const page = await b.get('/account');
    expect(page.body).toContain('Bound to your TestIdP account');
    expect(page.body).toContain('value="unbind"');
    const res = await b.post('/account/idp', { csrf: csrfOf(page.body), action: 'unbind' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/account?done=unbound');
    expect(await findIdentity(t.db, ISSUER, `sub-${user.id}`)).toBeUndefined();
    const events = await eventsOf(user.id, 'idp.unbound');
    expect(events).toHaveLength(1);
    expect(JSON.stringify(events[0]!.data)).toContain(ISSUER);
    const after = await b.get('/account?done=unbound');
    expect(after.body).toContain('not bound yet');
    expect(after.body).toContain('value="bind"');
  });

  it('account POSTs need a signed-in session', async () => {
    const b = new Browser(t.app);
    const page = await b.get('/account');
    const res = await b.post('/account/profile', { csrf: csrfOf(page.body), name: 'X', action: 'save' });
    expect(res.statusCode).toBe(401);
    expect(res.headers['content-type']).toMatch(/text\/html/);
  });

  it('every POST without the CSRF token, with another session’s token, from another origin or as text/plain → 403, nothing changes', async () => {
    const client = await makeClient(t);
    const { b, user } = await signedIn();
    const tokens = await tokensFor(b, client);
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: ISSUER, subject: `csrf-${user.id}`, email: null, createdAt: t.clock.now() });
    const victim = await makeUser(t.app);
    const attacker = await signedIn();
    const foreignToken = csrfOf((await attacker.b.get('/account')).body);
    const ownToken = csrfOf((await b.get('/account')).body);
    const before = await findUserById(t.db, user.id);

    const posts: Array<[string, Record<string, string>]> = [
      ['/account', { action: 'logout' }],
      ['/account', { action: 'login', email: victim.email, password: victim.password }],
      ['/account/profile', { name: 'Mallory', phone_number: '+15555550100', birthdate: '1970-01-01', action: 'save' }],
      ['/account/password', { password: user.password, new_password: NEW_PASSWORD, action: 'save' }],
      ['/account/apps', { action: 'deny', client_id: client.app.id }],
      ['/account/idp', { action: 'unbind' }],
      ['/account/idp', { action: 'bind' }],
    ];
    for (const [url, form] of posts) {
      const attempts = [
        await b.post(url, form),
        await b.post(url, { ...form, csrf: foreignToken }),
        await b.post(url, { ...form, csrf: ownToken }, { origin: 'https://evil.example' }),
        await t.app.inject({ method: 'POST', url, headers: { ...b.jar.header(), 'content-type': 'text/plain', origin: 'https://evil.example' }, payload: `csrf=${ownToken}&action=logout` }),
      ];
      for (const res of attempts) {
        expect(res.statusCode, `${url} ${JSON.stringify(form)}`).toBe(403);
        expect(res.headers.location).toBeUndefined();
      }
    }
    // Nothing changed: same session, same profile and password, tokens alive, still bound.
    expect((await b.get('/account')).body).toContain('value="logout"');
    expect(await findUserById(t.db, user.id)).toEqual(before);
    expect((await refresh(t.app, client, tokens.refresh_token)).statusCode).toBe(200);
    expect(await findIdentity(t.db, ISSUER, `csrf-${user.id}`)).toBeDefined();
    const anyTransaction = await t.db.selectFrom('one_time_tokens').select('id').where('kind', '=', 'idp_state').where('user_id', '=', user.id).execute();
    expect(anyTransaction).toHaveLength(0);
    expect(await eventsOf(user.id, 'consent.revoked')).toHaveLength(0);
    // The victim was not signed in anywhere by the login attempts.
    const sessions = await t.db.selectFrom('browser_sessions').select('id_hash').where('user_id', '=', victim.id).execute();
    expect(sessions).toHaveLength(0);
  });

  it('HTML-escapes user and app data', async () => {
    const evil = '<img src=x onerror=alert(1)>';
    const client = await makeClient(t, { name: '<script>alert("app")</script>' });
    const { b, user } = await signedIn();
    await tokensFor(b, client);
    expect((await send(b, '/account/profile', { name: evil, phone_number: '', birthdate: '', action: 'save' })).statusCode).toBe(303);
    expect((await findUserById(t.db, user.id))!.name).toBe(evil);
    const page = await b.get('/account');
    expect(page.body).not.toContain(evil);
    expect(page.body).not.toContain('<script>alert');
    expect(page.body).toContain('&lt;img src=x onerror=alert(1)&gt;');
    expect(page.body).toContain('&lt;script&gt;');
    expect(page.headers['content-security-policy']).toMatch(/frame-ancestors 'none'/);
    expect(String(page.headers['cache-control'])).toMatch(/no-store/);
  });
});
