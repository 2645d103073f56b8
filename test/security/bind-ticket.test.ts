import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findIdentity } from '../../src/storage/repos/idp.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';
import { Browser, csrfOf, PASSWORD, relative } from '../helpers/oauth-flows.js';
import { type ScriptedProvider, startScriptedProvider } from '../helpers/scripted-provider.js';

/**
 * Bind-first tickets (`/continue?ticket=bt_…`, SECURITY issue "bind-first ticket works in any
 * browser"): a ticket works only in the browser that holds it, in every configuration — the browser
 * that started the provider sign-in where pages share the callback's origin, else the first browser that
 * opened it — and binding to a signed-in account asks for its password unless that sign-in is fresh,
 * naming the provider account that would be bound.
 */

const CLIENT_ID = 'gatehouse-client';
const CLIENT_SECRET = `secret-${randomBytes(12).toString('hex')}`;
const REDIRECT = 'https://app.example/cb';

let p: ScriptedProvider;
beforeAll(async () => {
  p = await startScriptedProvider({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
});
afterAll(async () => {
  await p?.close();
});

const env = (extra: Record<string, string> = {}) => ({
  IDP_ISSUER: p.issuer,
  IDP_CLIENT_ID: CLIENT_ID,
  IDP_CLIENT_SECRET: CLIENT_SECRET,
  IDP_NAME: 'ScriptedIdP',
  IP_AUTH_PER_MINUTE: '100000',
  ...extra,
});

/** Runs a provider sign-in of an unbound subject in `browser` up to the callback's redirect; returns the ticket path. */
async function providerSignIn(t: TestApp, browser: Browser, appId: string, sub: string, email: string): Promise<string> {
  const start = await browser.get(`/oauth/idp/start?${new URLSearchParams({ client_id: appId, redirect_uri: REDIRECT, state: 'st-1' })}`);
  expect(start.statusCode).toBe(302);
  const authorize = new URL(start.headers.location as string);
  const now = t.clock.now();
  const code = randomBytes(12).toString('hex');
  p.codes.set(code, await p.sign({ iss: p.issuer, sub, aud: CLIENT_ID, iat: now, exp: now + 300, nonce: authorize.searchParams.get('nonce'), email }));
  const callback = await browser.get(`/oauth/idp/callback?${new URLSearchParams({ code, state: authorize.searchParams.get('state')! })}`);
  expect(callback.statusCode).toBe(303);
  const location = callback.headers.location as string;
  expect(location).toMatch(/\/continue\?ticket=bt_/);
  return relative(location);
}

const bound = async (t: TestApp, sub: string) => (await findIdentity(t.db, p.issuer, sub))?.userId;

describe('bind-first tickets when the pages have their own origin (AUTH_URL ≠ BASE_URL)', () => {
  let t: TestApp;
  let appId: string;
  beforeAll(async () => {
    t = await buildTestApp({ env: env({ BASE_URL: 'http://api.localhost:3000', AUTH_URL: 'http://auth.localhost:3000' }) });
    appId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });
  afterAll(async () => {
    await t?.close();
  });

  it("another browser cannot use a ticket the attacker's browser opened", async () => {
    const attacker = new Browser(t.app);
    const ticket = await providerSignIn(t, attacker, appId, 'attacker-sub-1', 'attacker@evil.example');
    expect((await attacker.get(ticket)).statusCode).toBe(200);

    const victim = new Browser(t.app);
    await victim.register();
    const page = await victim.get(ticket);
    expect(page.statusCode).toBe(400);
    const csrf = csrfOf((await victim.get('/account')).body);
    const bind = await victim.post(ticket, { csrf, action: 'bind', password: PASSWORD });
    expect(bind.statusCode).toBe(400);
    expect(await bound(t, 'attacker-sub-1')).toBeUndefined();
  });

  it('an intercepted link opened first by a victim shows the provider account, and binding needs the password', async () => {
    const attacker = new Browser(t.app);
    const ticket = await providerSignIn(t, attacker, appId, 'attacker-sub-2', 'attacker2@evil.example');
    const victim = new Browser(t.app);
    const { email } = await victim.register();
    t.clock.advance(400); // the victim's sign-in is no longer fresh
    const page = await victim.get(ticket);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('attacker2@evil.example');
    expect(page.body).toContain('ScriptedIdP');
    expect(page.body).toContain(`name="password"`);
    const csrf = csrfOf(page.body);
    const noPassword = await victim.post(ticket, { csrf, action: 'bind' });
    expect(noPassword.statusCode).toBe(401);
    expect(await bound(t, 'attacker-sub-2')).toBeUndefined();
    // Positive control: the account owner who means it confirms with the password.
    const withPassword = await victim.post(ticket, { csrf, action: 'bind', password: PASSWORD });
    expect(withPassword.statusCode).toBe(303);
    expect(withPassword.headers.location).toMatch(/^https:\/\/app\.example\/cb\?session=/);
    const user = await t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirstOrThrow();
    expect(await bound(t, 'attacker-sub-2')).toBe(user.id);
  });

  it('positive control: the browser that came back from the provider signs in with its password and binds', async () => {
    const owner = new Browser(t.app);
    const { email } = await new Browser(t.app).register();
    const ticket = await providerSignIn(t, owner, appId, 'owner-sub-1', email);
    const page = await owner.get(ticket);
    expect(page.statusCode).toBe(200);
    const res = await owner.post(ticket, { csrf: csrfOf(page.body), action: 'login', email, password: PASSWORD });
    expect(res.statusCode).toBe(303);
    expect(await bound(t, 'owner-sub-1')).toBeDefined();
  });
});

describe('bind-first tickets when the pages share the callback origin', () => {
  let t: TestApp;
  let appId: string;
  beforeAll(async () => {
    t = await buildTestApp({ env: env() });
    appId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });
  afterAll(async () => {
    await t?.close();
  });

  it('a browser without the binder cookie of the provider sign-in gets the 400 page', async () => {
    const attacker = new Browser(t.app);
    const ticket = await providerSignIn(t, attacker, appId, 'attacker-sub-3', 'attacker3@evil.example');
    const victim = new Browser(t.app);
    await victim.register();
    expect((await victim.get(ticket)).statusCode).toBe(400);
    expect((await attacker.get(ticket)).statusCode).toBe(200);
  });

  it('binding to the signed-in account needs the password once that sign-in is no longer fresh', async () => {
    const owner = new Browser(t.app);
    const { email } = await owner.register();
    t.clock.advance(400);
    const ticket = await providerSignIn(t, owner, appId, 'owner-sub-2', email);
    const page = await owner.get(ticket);
    expect(page.body).toContain(`name="password"`);
    const csrf = csrfOf(page.body);
    const wrong = await owner.post(ticket, { csrf, action: 'bind', password: 'not the password at all' });
    expect(wrong.statusCode).toBe(401);
    expect(await bound(t, 'owner-sub-2')).toBeUndefined();
    const right = await owner.post(ticket, { csrf, action: 'bind', password: PASSWORD });
    expect(right.statusCode).toBe(303);
    expect(await bound(t, 'owner-sub-2')).toBeDefined();
  });

  it('a fresh sign-in in this browser binds without asking again', async () => {
    const owner = new Browser(t.app);
    const { email } = await owner.register();
    const ticket = await providerSignIn(t, owner, appId, 'owner-sub-3', email);
    const page = await owner.get(ticket);
    expect(page.body).not.toContain('id="bind_password"');
    const res = await owner.post(ticket, { csrf: csrfOf(page.body), action: 'bind' });
    expect(res.statusCode).toBe(303);
    expect(await bound(t, 'owner-sub-3')).toBeDefined();
  });
});
