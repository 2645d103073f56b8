import { decodeJwt } from 'jose';
import { generateSync } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, FrozenClock, nextWindowStart, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { authorizeUrl, Browser, csrfOf, exchangeCode, makeClient, PASSWORD, pkcePair, relative, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { startProvider, type TestProvider } from '../helpers/oidc-provider.js';
import { newId } from '../../src/shared/ids.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { grantConsent } from '../../src/storage/repos/consents.js';
import { DEFAULT_SCOPE } from '../../src/shared/scopes.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';

/**
 * TOTP as the second step of every sign-in door (docs/guides/mfa-and-passkeys.md, issue 16), black-box: enrol on
 * `/account` with a code computed from the secret the page shows, then sign in through the hosted
 * authorize flow, through REST and through the native provider door; replayed codes, recovery codes once, the lockout, and an app that
 * requires MFA from a user who has none. The clock is frozen at the start of a 30-second step and moved
 * a step at a time, so no code straddles a step edge.
 */

let t: TestApp;
let clock: FrozenClock;
let provider: TestProvider;

beforeAll(async () => {
  clock = new FrozenClock(nextWindowStart(30) + 3);
  provider = await startProvider({ redirectUris: ['http://localhost:3000/oauth/idp/callback'] });
  t = await buildTestApp({
    clock,
    env: { IP_AUTH_PER_MINUTE: '100000', IDP_ISSUER: provider.issuer, IDP_CLIENT_ID: provider.clientId, IDP_CLIENT_SECRET: provider.clientSecret, IDP_NAME: 'TestIdP' },
  });
});
/** Every secret, code and token the tests handle: none may appear in a log line. */
const secrets: string[] = [];

afterAll(async () => {
  expectNoSecretsInLogs(t.logs, secrets);
  await t?.close();
  await provider?.close();
});

const codeFor = (secret: string) => {
  const code = generateSync({ secret, epoch: clock.now() });
  secrets.push(code);
  return code;
};
const nextStep = () => clock.advance(30);

const fieldValues = (html: string, field: string) => [...html.matchAll(new RegExp(`data-field="${field}">([^<]+)<`, 'g'))].map((m) => m[1]!);

/** A user who registered in a browser and proved the address (factors are enrolled only on proven addresses). */
async function verifiedUser(prefix: string): Promise<{ browser: Browser; email: string }> {
  const browser = new Browser(t.app);
  const { email } = await browser.register(uniqueEmail(prefix));
  await t.db.updateTable('users').set({ email_verified: 1 }).where('email', '=', email).execute();
  return { browser, email };
}

/** Registers a user in a browser and turns on an authenticator app; returns its secret and recovery codes. */
async function enrolledUser(): Promise<{ browser: Browser; email: string; secret: string; recoveryCodes: string[] }> {
  const { browser, email } = await verifiedUser('mfa');
  const account = await browser.get('/account');
  const setup = await browser.post('/account/mfa', { csrf: csrfOf(account.body), action: 'setup_totp' });
  expect(setup.statusCode).toBe(303);
  expect(setup.headers.location).toBe('/account/mfa/totp');
  const page = await browser.get('/account/mfa/totp');
  expect(page.statusCode).toBe(200);
  const [secret] = fieldValues(page.body, 'totp_secret');
  expect(secret).toMatch(/^[A-Z2-7]{32}$/);
  expect(page.body).toContain('<svg');
  const wrong = await browser.post('/account/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(secret!) === '000000' ? '111111' : '000000' });
  expect(wrong.statusCode).toBe(400);
  expect(wrong.body).toContain('aria-invalid="true"');
  const confirmed = await browser.post('/account/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(secret!) });
  expect(confirmed.statusCode).toBe(200);
  const recoveryCodes = fieldValues(confirmed.body, 'recovery_code');
  expect(recoveryCodes).toHaveLength(10);
  expect(new Set(recoveryCodes).size).toBe(10);
  nextStep();
  secrets.push(secret!, ...recoveryCodes);
  return { browser, email, secret: secret!, recoveryCodes };
}

/** Follows an authorize flow in a signed-out browser: password on /login, then whatever /mfa asks. */
async function signInThroughAuthorize(client: TestClient, email: string) {
  const browser = new Browser(t.app);
  const { url, verifier } = authorizeUrl(client);
  const toLogin = await browser.get(url);
  expect(toLogin.statusCode).toBe(302);
  const loginPath = relative(String(toLogin.headers.location));
  const login = await browser.submit(loginPath, { email, password: PASSWORD, action: 'login' });
  expect(login.statusCode).toBe(303);
  return { browser, verifier, login };
}

const restLogin = (client: TestClient, email: string) =>
  t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password: PASSWORD, client_id: client.app.id } });
const restVerify = (client: TestClient, session: string, code: string) =>
  t.app.inject({ method: 'POST', url: '/v1/auth/mfa/verify', payload: { session, code, client_id: client.app.id } });

describe('hosted sign-in with an authenticator app', () => {
  let client: TestClient;
  let user: Awaited<ReturnType<typeof enrolledUser>>;
  beforeAll(async () => {
    client = await makeClient(t);
    user = await enrolledUser();
  });

  it('asks for the code after the password, and the ID token says two factors', async () => {
    const { browser, verifier, login } = await signInThroughAuthorize(client, user.email);
    expect(login.headers.location).toMatch(/^\/mfa/);
    // Not signed in yet: the account page still shows the sign-in form.
    expect((await browser.get('/account')).body).toContain('value="login"');
    const mfaPage = await browser.get(String(login.headers.location));
    expect(mfaPage.statusCode).toBe(200);
    expect(mfaPage.body).toContain('name="code"');

    const wrong = await browser.post(String(login.headers.location), { csrf: csrfOf(mfaPage.body), action: 'verify', code: '12345x' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toMatch(/aria-invalid="true" aria-describedby="code-error"/);

    const ok = await browser.post(String(login.headers.location), { csrf: csrfOf(mfaPage.body), action: 'verify', code: codeFor(user.secret) });
    expect(ok.statusCode).toBe(303);
    let res = await browser.get(String(ok.headers.location));
    if (relative(String(res.headers.location)).startsWith('/consent')) {
      const allowed = await browser.submit(relative(String(res.headers.location)), { action: 'allow' });
      res = await browser.get(String(allowed.headers.location));
    }
    const code = new URL(String(res.headers.location)).searchParams.get('code')!;
    const tokens = await exchangeCode(t.app, client, code, verifier);
    expect(tokens.statusCode).toBe(200);
    const idToken = decodeJwt(tokens.json().id_token);
    expect(idToken.amr).toEqual(['pwd', 'otp', 'mfa']);
    expect(idToken.acr).toBe('urn:gatehouse:acr:2fa');
    const events = await t.db.selectFrom('events').select(['data']).where('type', '=', 'user.login_succeeded').where('app_id', '=', client.app.id).execute();
    expect(events.map((e) => JSON.parse(e.data).amr)).toContainEqual(['pwd', 'otp', 'mfa']);
    nextStep();

    // prompt=login, and max_age shorter than the sign-in's age, ask for both factors again; the new
    // ID token's auth_time is the time of the new sign-in.
    let authTime = Number(idToken.auth_time);
    for (const extra of [{ prompt: 'login' }, { max_age: '20' }] as Record<string, string>[]) {
      nextStep();
      const again = authorizeUrl(client, { extra });
      const toLogin = await browser.get(again.url);
      expect(relative(String(toLogin.headers.location)), JSON.stringify(extra)).toMatch(/^\/login/);
      const password = await browser.submit(relative(String(toLogin.headers.location)), { email: user.email, password: PASSWORD, action: 'login' });
      expect(String(password.headers.location)).toMatch(/^\/mfa/);
      const page = await browser.get(String(password.headers.location));
      const verified = await browser.post(String(password.headers.location), { csrf: csrfOf(page.body), action: 'verify', code: codeFor(user.secret) });
      const back = await browser.get(String(verified.headers.location));
      const reissued = await exchangeCode(t.app, client, new URL(String(back.headers.location)).searchParams.get('code')!, again.verifier);
      const later = decodeJwt(reissued.json().id_token);
      expect(later.amr).toEqual(['pwd', 'otp', 'mfa']);
      expect(Number(later.auth_time)).toBeGreaterThan(authTime);
      authTime = Number(later.auth_time);
    }
    nextStep();
  });

  it('refuses a code of a time step already used, and a recovery code twice', async () => {
    const used = codeFor(user.secret);
    const first = await signInThroughAuthorize(client, user.email);
    const page = await first.browser.get(String(first.login.headers.location));
    expect((await first.browser.post('/mfa', { csrf: csrfOf(page.body), action: 'verify', code: used })).statusCode).toBe(303);

    const second = await signInThroughAuthorize(client, user.email);
    const page2 = await second.browser.get(String(second.login.headers.location));
    const replay = await second.browser.post('/mfa', { csrf: csrfOf(page2.body), action: 'verify', code: used });
    expect(replay.statusCode).toBe(400);

    const recovery = user.recoveryCodes[0]!;
    expect((await second.browser.post('/mfa', { csrf: csrfOf(page2.body), action: 'verify', code: recovery.toUpperCase() })).statusCode).toBe(303);
    const third = await signInThroughAuthorize(client, user.email);
    const page3 = await third.browser.get(String(third.login.headers.location));
    expect((await third.browser.post('/mfa', { csrf: csrfOf(page3.body), action: 'verify', code: recovery })).statusCode).toBe(400);
    nextStep();
  });
});

describe('REST sign-in with an authenticator app', () => {
  let client: TestClient;
  let user: Awaited<ReturnType<typeof enrolledUser>>;
  beforeAll(async () => {
    client = await makeClient(t);
    user = await enrolledUser();
  });

  it('answers pending mfa; the session is good for nothing else until the code', async () => {
    const login = await restLogin(client, user.email);
    expect(login.statusCode).toBe(200);
    const pending = login.json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'mfa', methods: ['totp', 'recovery_code'] });
    expect(pending.access_token).toBeUndefined();

    const asBearer = await t.app.inject({ method: 'POST', url: '/v1/email_verify/request', headers: { authorization: `Bearer ${pending.session}` } });
    expect(asBearer.statusCode).toBe(401);
    const profile = await t.app.inject({ method: 'POST', url: '/v1/auth/profile/complete', payload: { session: pending.session, client_id: client.app.id, data: {} } });
    expect(profile.json()).toMatchObject({ code: 'invalid_token' });

    expect((await restVerify(client, pending.session, '000001')).json()).toMatchObject({ code: 'invalid_code' });
    const ok = await restVerify(client, pending.session, codeFor(user.secret));
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', token_type: 'Bearer' });
    expect(decodeJwt(ok.json().id_token).amr).toEqual(['pwd', 'otp', 'mfa']);
    // Once only: the same session cannot be completed again.
    expect((await restVerify(client, pending.session, user.recoveryCodes[1]!)).json()).toMatchObject({ code: 'invalid_token' });
    nextStep();
  });

  it('locks the second factor after five wrong codes, like passwords', async () => {
    const other = await enrolledUser();
    const { session } = (await restLogin(client, other.email)).json();
    for (let i = 0; i < 5; i++) expect((await restVerify(client, session, '99999' + i)).statusCode).toBe(400);
    const locked = await restVerify(client, session, codeFor(other.secret));
    expect(locked.statusCode).toBe(429);
    expect(locked.json().code).toBe('rate_limited');
    const events = await t.db.selectFrom('events').select(['type']).where('type', 'in', ['mfa.challenge_failed', 'user.locked']).execute();
    expect(events.filter((e) => e.type === 'mfa.challenge_failed').length).toBeGreaterThanOrEqual(5);
    // The lock ends after LOGIN_LOCK_SECONDS (the pending session has expired by then: sign in again).
    clock.advance(t.config.throttle.loginLockSeconds + 1);
    const { session: later } = (await restLogin(client, other.email)).json();
    expect((await restVerify(client, later, codeFor(other.secret))).statusCode).toBe(200);
    nextStep();
  });
});

describe('an app that requires MFA', () => {
  it('REST: a user without a factor sets up an authenticator app during sign-in and gets the recovery codes once', async () => {
    const client = await makeClient(t, { mfa: 'required' });
    const { email } = await verifiedUser('req');
    const pending = (await restLogin(client, email)).json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'mfa', methods: [], enroll: ['totp'] });
    const setup = await t.app.inject({ method: 'POST', url: '/v1/auth/mfa/totp/setup', payload: { session: pending.session, client_id: client.app.id } });
    expect(setup.statusCode).toBe(200);
    const { secret, otpauth_uri } = setup.json();
    expect(otpauth_uri).toMatch(/^otpauth:\/\/totp\//);
    const ok = await restVerify(client, pending.session, codeFor(secret));
    expect(ok.statusCode).toBe(200);
    expect(ok.json().recovery_codes).toHaveLength(10);
    nextStep();
    // From now on the factor is asked at every sign-in, and setup is refused.
    const again = (await restLogin(client, email)).json();
    expect(again).toMatchObject({ next_step: 'mfa', methods: ['totp', 'recovery_code'] });
    expect(again.enroll).toBeUndefined();
    const refused = await t.app.inject({ method: 'POST', url: '/v1/auth/mfa/totp/setup', payload: { session: again.session, client_id: client.app.id } });
    expect(refused.statusCode).toBe(409);
  });

  it('hosted: /mfa shows the QR code and the secret, and the first code signs in', async () => {
    const client = await makeClient(t, { mfa: 'required' });
    const { email } = await verifiedUser('reqh');
    const { browser, login } = await signInThroughAuthorize(client, email);
    expect(login.headers.location).toMatch(/^\/mfa/);
    const page = await browser.get(String(login.headers.location));
    const [secret] = fieldValues(page.body, 'totp_secret');
    expect(secret).toBeTruthy();
    const done = await browser.post('/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(secret!) });
    expect(done.statusCode).toBe(200); // the recovery codes, then on to the app
    expect(fieldValues(done.body, 'recovery_code')).toHaveLength(10);
    expect(done.body).toMatch(/href="\/oauth\/authorize\?/);
    nextStep();
  });

  it('a signed-in session without a second factor is stepped up at /oauth/authorize', async () => {
    const optional = await makeClient(t);
    const required = await makeClient(t, { mfa: 'required' });
    const { browser } = await verifiedUser('step');
    // Fine for an app that does not require MFA ...
    const first = await browser.get(authorizeUrl(optional).url);
    expect(relative(String(first.headers.location))).toMatch(/^\/consent/);
    // ... but an app that requires it sends the same session to /mfa.
    const second = await browser.get(authorizeUrl(required).url);
    expect(relative(String(second.headers.location))).toMatch(/^\/mfa/);
    const none = await browser.get(authorizeUrl(required, { extra: { prompt: 'none' } }).url);
    expect(new URL(String(none.headers.location)).searchParams.get('error')).toBe('interaction_required');
  });
});

describe('native sign-in through the provider (POST /oauth/idp/exchange, /oauth/idp/resume)', () => {
  const REDIRECT = 'com.example.mfa://cb';

  /** A provider id_token of a user bound to the subject `sub`, dated by the test clock. */
  async function boundIdToken(email: string, sub: string): Promise<string> {
    const row = await t.db.selectFrom('users').select(['id']).where('email', '=', email).executeTakeFirstOrThrow();
    await insertIdentity(t.db, { id: newId('pid'), userId: row.id, issuer: provider.issuer, subject: sub, email: null, createdAt: clock.now() });
    return provider.sign(provider.claims(sub, { iat: clock.now(), exp: clock.now() + 600 }));
  }
  const native = (path: 'exchange' | 'resume', client: TestClient, body: Record<string, unknown>) =>
    t.app.inject({ method: 'POST', url: `/oauth/idp/${path}`, payload: { client_id: client.app.id, redirect_uri: REDIRECT, ...body } });

  it('an enrolled user: exchange answers pending mfa, resume with the code answers ok (session and code modes)', async () => {
    const client = await makeClient(t, { mfa: 'required', redirectUris: [REDIRECT] });
    const user = await enrolledUser();
    const sub = `native-${user.email}`;
    const pending = await native('exchange', client, { id_token: await boundIdToken(user.email, sub) });
    expect(pending.statusCode).toBe(200);
    expect(pending.json()).toMatchObject({ status: 'pending', next_step: 'mfa', methods: ['totp', 'recovery_code'] });
    // The pending session is no bearer credential, and resume without the factor still asks for it.
    expect((await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${pending.json().session}` } })).statusCode).toBe(401);
    expect((await native('resume', client, { session: pending.json().session })).json()).toMatchObject({ status: 'pending', next_step: 'mfa' });
    expect((await native('resume', client, { session: pending.json().session, code: '000001' })).json()).toMatchObject({ code: 'invalid_code' });
    const ok = await native('resume', client, { session: pending.json().session, code: codeFor(user.secret) });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    nextStep();

    // response_mode=code, for a user who consented before: the code is issued only after the factor,
    // and its ID token says two factors.
    const { id: userId } = await t.db.selectFrom('users').select(['id']).where('email', '=', user.email).executeTakeFirstOrThrow();
    await grantConsent(t.db, client.app.id, userId, DEFAULT_SCOPE, clock.now());
    const pkce = pkcePair();
    const codeMode = { response_mode: 'code', code_challenge: pkce.challenge, code_challenge_method: 'S256' };
    const second = await native('exchange', client, { ...codeMode, id_token: await provider.sign(provider.claims(sub, { iat: clock.now(), exp: clock.now() + 600 })) });
    expect(second.json()).toMatchObject({ status: 'pending', next_step: 'mfa' });
    expect(second.json().code).toBeUndefined();
    const done = await native('resume', client, { ...codeMode, session: second.json().session, code: user.recoveryCodes[2] });
    expect(done.json()).toMatchObject({ status: 'ok', response_mode: 'code' });
    const tokens = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      payload: { grant_type: 'authorization_code', code: done.json().code, redirect_uri: REDIRECT, client_id: client.app.id, code_verifier: pkce.verifier },
    });
    expect(tokens.statusCode).toBe(200);
    const idToken = decodeJwt(tokens.json().id_token);
    expect(idToken.amr).toEqual(['fed', 'otp', 'mfa']);
    expect(idToken.acr).toBe('urn:gatehouse:acr:2fa');
    nextStep();
  });

  it('a user without a factor sets one up with the pending session, then resume completes', async () => {
    const client = await makeClient(t, { mfa: 'required', redirectUris: [REDIRECT] });
    const { email } = await verifiedUser('native');
    const pending = (await native('exchange', client, { id_token: await boundIdToken(email, `native-${email}`) })).json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'mfa', methods: [], enroll: ['totp'] });
    const setup = await t.app.inject({ method: 'POST', url: '/v1/auth/mfa/totp/setup', payload: { session: pending.session, client_id: client.app.id } });
    expect(setup.statusCode).toBe(200);
    const ok = await native('resume', client, { session: pending.session, code: codeFor(setup.json().secret) });
    expect(ok.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    nextStep();
  });
});

describe('changing factors on the account page', () => {
  it('needs a fresh second factor: after 15 minutes removal sends the user to verify again', async () => {
    const user = await enrolledUser();
    clock.advance(16 * 60);
    const account = await user.browser.get('/account');
    const removed = await user.browser.post('/account/mfa', { csrf: csrfOf(account.body), action: 'remove_totp' });
    expect(removed.headers.location).toBe('/account?mfa_error=remove#mfa');
    const reauth = await user.browser.post('/account/mfa', { csrf: csrfOf(account.body), action: 'reauth' });
    expect(reauth.headers.location).toBe('/mfa');
    const page = await user.browser.get('/mfa');
    const verified = await user.browser.post('/mfa', { csrf: csrfOf(page.body), action: 'verify', code: codeFor(user.secret) });
    expect(verified.headers.location).toBe('/account');
    const fresh = await user.browser.get('/account');
    const ok = await user.browser.post('/account/mfa', { csrf: csrfOf(fresh.body), action: 'remove_totp' });
    expect(ok.headers.location).toBe('/account?done=mfa_removed#mfa');
    // No factor left: the recovery codes went with it, and the password alone signs in again.
    const client = await makeClient(t);
    expect((await restLogin(client, user.email)).json()).toMatchObject({ status: 'ok' });
    const events = await t.db.selectFrom('events').select(['type']).where('type', 'in', ['mfa.enrolled', 'mfa.removed']).execute();
    expect(events.map((e) => e.type)).toEqual(expect.arrayContaining(['mfa.enrolled', 'mfa.removed']));
    nextStep();
  });

  it('new recovery codes replace the old ones', async () => {
    const user = await enrolledUser();
    const account = await user.browser.get('/account');
    const regenerated = await user.browser.post('/account/mfa', { csrf: csrfOf(account.body), action: 'regenerate_codes' });
    const fresh = fieldValues(regenerated.body, 'recovery_code');
    expect(fresh).toHaveLength(10);
    const client = await makeClient(t);
    const { session } = (await restLogin(client, user.email)).json();
    expect((await restVerify(client, session, user.recoveryCodes[0]!)).json()).toMatchObject({ code: 'invalid_code' });
    expect((await restVerify(client, session, fresh[0]!)).json()).toMatchObject({ status: 'ok' });
  });
});

describe('a secret that cannot be opened (SECRET_KEY changed since enrolment)', () => {
  it('its codes are refused as wrong (400, never 500), the operator is told, and a recovery code still signs in', async () => {
    const user = await enrolledUser();
    const { id } = await t.db.selectFrom('users').select(['id']).where('email', '=', user.email).executeTakeFirstOrThrow();
    const sealed = await t.db.selectFrom('totp_factors').select(['secret_sealed']).where('user_id', '=', id).executeTakeFirstOrThrow();
    const [version, iv, body] = sealed.secret_sealed.split('.');
    await t.db.updateTable('totp_factors').set({ secret_sealed: `${version}.${iv}.${body}.${Buffer.alloc(16).toString('base64url')}` }).where('user_id', '=', id).execute();
    const client = await makeClient(t);
    const { session } = (await restLogin(client, user.email)).json();
    const refused = await restVerify(client, session, codeFor(user.secret));
    expect(refused.statusCode).toBe(400);
    expect(refused.json()).toMatchObject({ code: 'invalid_code' });
    expect(t.logs.some((line) => line.includes('TOTP secret of a user cannot be opened'))).toBe(true);
    expect((await restVerify(client, session, user.recoveryCodes[0]!)).json()).toMatchObject({ status: 'ok' });
    nextStep();
  });
});

describe('an operator resets lost factors', () => {
  it('DELETE /v1/admin/users/{id}/mfa removes them (mfa.reset), and the password alone signs in again', async () => {
    const user = await enrolledUser();
    const client = await makeClient(t);
    expect((await restLogin(client, user.email)).json()).toMatchObject({ next_step: 'mfa' });
    const row = await t.db.selectFrom('users').select(['id']).where('email', '=', user.email).executeTakeFirstOrThrow();
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/admin/users/${row.id}/mfa` })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'DELETE', url: '/v1/admin/users/usr_nobody/mfa', headers: admin })).json()).toMatchObject({ code: 'not_found' });
    const reset = await t.app.inject({ method: 'DELETE', url: `/v1/admin/users/${row.id}/mfa`, headers: admin });
    expect(reset.statusCode).toBe(204);
    expect((await restLogin(client, user.email)).json()).toMatchObject({ status: 'ok' });
    const events = await t.db.selectFrom('events').select(['data']).where('type', '=', 'mfa.reset').where('user_id', '=', row.id).execute();
    expect(events.map((e) => JSON.parse(e.data))).toEqual([{ by: 'admin', totp: true, passkeys: 0 }]);
  });
});
