import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRecoveryCodes, recoveryCodeHash } from '../../src/mfa/codes.js';
import { replaceRecoveryCodes } from '../../src/storage/repos/factors.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { tokensFor } from '../helpers/members.js';
import { authorizeAndGetCode, authorizeUrl, Browser, csrfOf, makeClient, relative, type TestClient } from '../helpers/oauth-flows.js';

/**
 * Account deletion on the hosted pages (docs/account/deletion.md), without a browser engine: the
 * "Delete account" form needs the password, the confirmation box and (with a second factor) a code;
 * scheduling signs out this browser and every app token; a sign-in during the grace inside an
 * authorization request is held at /account/deletion/scheduled, and "Keep my account" cancels the
 * deletion and resumes the request to a code. SQLite and PostgreSQL.
 */

const PASSWORD = 'page deletion passphrase 9';
let t: TestApp;
let client: TestClient;

beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', MAIL_PER_HOUR: '50' } });
  client = await makeClient(t, { redirectUris: ['https://a.example/cb'] });
});
afterAll(async () => t?.close());

const scheduledAt = async (id: string) => (await t.db.selectFrom('users').select('deletion_scheduled_at').where('id', '=', id).executeTakeFirstOrThrow()).deletion_scheduled_at;

async function signedIn(email: string): Promise<Browser> {
  const browser = new Browser(t.app);
  const page = await browser.get('/account');
  const res = await browser.post('/account', { csrf: csrfOf(page.body), action: 'login', email, password: PASSWORD });
  expect(res.statusCode).toBe(303);
  return browser;
}

async function deleteForm(browser: Browser, form: Record<string, string>) {
  const page = await browser.get('/account');
  expect(page.body).toContain('id="delete-account"');
  return browser.post('/account/deletion', { csrf: csrfOf(page.body), action: 'delete', ...form });
}

describe('the Delete account section', () => {
  it('refuses a wrong password and a missing confirmation, changing nothing; the right ones schedule, sign out this browser and every app token', async () => {
    const user = await makeUser(t.app, { password: PASSWORD, email_verified: 1 });
    const tokens = await tokensFor(t, client.app, user);
    const browser = await signedIn(user.email);

    const wrong = await deleteForm(browser, { deletion_password: 'wrong password here', deletion_confirm: '1' });
    expect(wrong.headers.location).toBe('/account?deletion_error=wrong_password#delete-account');
    const shown = await browser.get(relative(String(wrong.headers.location)));
    expect(shown.body).toContain('id="deletion_password-error"');
    const unconfirmed = await deleteForm(browser, { deletion_password: PASSWORD });
    expect(unconfirmed.headers.location).toBe('/account?deletion_error=confirm#delete-account');
    expect(await scheduledAt(user.id)).toBeNull();

    const done = await deleteForm(browser, { deletion_password: PASSWORD, deletion_confirm: '1' });
    expect(done.statusCode).toBe(303);
    expect(String(done.headers.location)).toMatch(/^\/account\/deletion\/done\?at=\d+$/);
    expect(await scheduledAt(user.id)).not.toBeNull();
    expect((await browser.get(String(done.headers.location))).body).toContain('data-deletion-done');
    // This browser is signed out, and so is every app.
    expect((await browser.get('/account')).body).toContain('value="login"');
    expect((await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } })).statusCode).toBe(401);
  });

  it('with a second factor, asks for its code (a fresh password-only session is not enough)', async () => {
    const user = await makeUser(t.app, { password: PASSWORD, email_verified: 1 });
    const browser = await signedIn(user.email);
    await t.db.insertInto('totp_factors').values({ user_id: user.id, secret_sealed: 'not-openable', confirmed_at: t.clock.now(), last_step: null, created_at: t.clock.now() }).execute();
    const [code] = newRecoveryCodes(1) as [string];
    await replaceRecoveryCodes(t.db, user.id, [recoveryCodeHash(code)!], t.clock.now());
    const page = await browser.get('/account');
    expect(page.body).toContain('name="deletion_code"');

    const noCode = await deleteForm(browser, { deletion_password: PASSWORD, deletion_confirm: '1' });
    expect(noCode.headers.location).toBe('/account?deletion_error=reauth_mfa#delete-account');
    const wrongCode = await deleteForm(browser, { deletion_password: PASSWORD, deletion_code: '000000', deletion_confirm: '1' });
    expect(wrongCode.headers.location).toBe('/account?deletion_error=invalid_code#delete-account');
    expect(await scheduledAt(user.id)).toBeNull();
    const ok = await deleteForm(browser, { deletion_password: PASSWORD, deletion_code: code, deletion_confirm: '1' });
    expect(String(ok.headers.location)).toMatch(/^\/account\/deletion\/done/);
    expect(await scheduledAt(user.id)).not.toBeNull();
  });
});

describe('signing in during the grace inside an authorization request', () => {
  it('holds the sign-in; no code is issued until "Keep my account", which cancels and resumes the request', async () => {
    const user = await makeUser(t.app, { password: PASSWORD, email_verified: 1 });
    expect(String((await deleteForm(await signedIn(user.email), { deletion_password: PASSWORD, deletion_confirm: '1' })).headers.location)).toMatch(/deletion\/done/);

    const browser = new Browser(t.app);
    const { url } = authorizeUrl(client);
    const toLogin = await browser.get(url);
    expect(relative(String(toLogin.headers.location))).toMatch(/^\/login/);
    const login = await browser.login(user.email, PASSWORD);
    expect(String(login.headers.location)).toMatch(/^\/account\/deletion\/scheduled/);
    // Held: the browser is not signed in (so the authorization request cannot go on to a code).
    expect((await browser.get('/account')).body).toContain('value="login"');
    const choice = await browser.get('/account/deletion/scheduled');
    expect(choice.statusCode).toBe(200);
    expect(choice.body).toContain('value="keep"');

    const kept = await browser.post('/account/deletion/scheduled', { csrf: csrfOf(choice.body), action: 'keep' });
    expect(kept.statusCode).toBe(303);
    expect(String(kept.headers.location)).toMatch(/^\/oauth\/authorize\?/);
    expect(await scheduledAt(user.id)).toBeNull();
    const { code } = await authorizeAndGetCode(browser, client);
    expect(code).toBeTruthy();
  });

  it('"Continue signing out" leaves the browser signed out and the deletion scheduled', async () => {
    const user = await makeUser(t.app, { password: PASSWORD, email_verified: 1 });
    await deleteForm(await signedIn(user.email), { deletion_password: PASSWORD, deletion_confirm: '1' });
    const due = await scheduledAt(user.id);
    const browser = new Browser(t.app);
    const login = await browser.login(user.email, PASSWORD);
    expect(String(login.headers.location)).toMatch(/^\/account\/deletion\/scheduled/);
    const choice = await browser.get('/account/deletion/scheduled');
    const left = await browser.post('/account/deletion/scheduled', { csrf: csrfOf(choice.body), action: 'leave' });
    expect(left.statusCode).toBe(200);
    expect(left.body).toContain('data-deletion-left');
    expect(await scheduledAt(user.id)).toBe(due);
    expect((await browser.get('/account')).body).toContain('value="login"');
    // The hold is gone: the choice page sends back to the account page.
    expect((await browser.get('/account/deletion/scheduled')).headers.location).toBe('/account');
  });
});
