import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { makeUser } from '../helpers/factories.js';
import { Browser, csrfOf, makeClient, relative, type TestClient } from '../helpers/oauth-flows.js';
import { SoftAuthenticator } from './soft-authenticator.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';

/**
 * Passkeys through `app.inject`, with a software authenticator: the REST doors for apps with their own
 * UI (a passkey an app registers with its access token signs in only at that app; discoverable sign-in
 * with the app's client id), the hosted account and sign-in forms behind the page script (account-wide
 * passkeys), the rules every answer meets (one use per challenge, bound to whoever asked, the right
 * origin, user verification, an advancing counter), and management. The Chromium tests
 * (browser.test.ts) drive the same pages with a real WebAuthn stack.
 */

const AUTH_ORIGIN = 'http://localhost:3000';
const APP_ORIGIN = 'https://app.example';

let t: TestApp;
let client: TestClient;
const secrets: string[] = [];

const post = (url: string, payload: unknown, headers: Record<string, string> = {}) => t.app.inject({ method: 'POST', url, payload: payload as object, headers });

async function accessTokenOf(email: string, password: string, app: TestClient = client): Promise<string> {
  const res = await post('/v1/auth/login', { email, password, client_id: app.app.id, ...(app.secret ? { client_secret: app.secret } : {}) });
  expect(res.statusCode, res.body).toBe(200);
  const token = res.json().access_token as string;
  secrets.push(token);
  return token;
}

/** The page script's JSON request for options, with the browser's cookies. */
const pageOptions = (browser: Browser, url: string, csrf: string) =>
  t.app.inject({ method: 'POST', url, headers: { ...browser.jar.header(), 'content-type': 'application/json' }, payload: { csrf } });

/** A verified user with a passkey `app` registered over REST with the user's access token (from the app's origin, unless another is given). */
async function userWithAppPasskey(options: { synced?: boolean; name?: string; origin?: string; app?: TestClient } = {}) {
  const app = options.app ?? client;
  const user = await makeUser(t.app, { email_verified: 1 });
  const token = await accessTokenOf(user.email, user.password, app);
  const authenticator = new SoftAuthenticator({ origin: options.origin ?? APP_ORIGIN, synced: options.synced });
  const optionsRes = await post('/v1/auth/passkey/register/options', {}, { authorization: `Bearer ${token}` });
  expect(optionsRes.statusCode, optionsRes.body).toBe(200);
  const verify = await post('/v1/auth/passkey/register/verify', { response: authenticator.create(optionsRes.json()), name: options.name }, { authorization: `Bearer ${token}` });
  expect(verify.statusCode, verify.body).toBe(201);
  return { user, token, authenticator, passkey: verify.json() };
}

/** A verified user who added an account-wide passkey on the hosted account page (the browser stays signed in). */
async function userWithAccountPasskey(options: { synced?: boolean } = {}) {
  const user = await makeUser(t.app, { email_verified: 1 });
  const browser = new Browser(t.app);
  expect((await browser.submit('/account', { email: user.email, password: user.password, action: 'login' })).statusCode).toBe(303);
  const csrf = csrfOf((await browser.get('/account')).body);
  const creation = await pageOptions(browser, '/account/passkeys/options', csrf);
  expect(creation.statusCode, creation.body).toBe(200);
  const authenticator = new SoftAuthenticator({ origin: AUTH_ORIGIN, synced: options.synced });
  const added = await browser.post('/account/passkeys', { csrf, action: 'add_passkey', response: JSON.stringify(authenticator.create(creation.json())) });
  // The account's first factor: its recovery codes are shown once.
  expect(added.statusCode, added.body).toBe(200);
  return { user, authenticator, browser };
}

async function signInOptions(app: TestClient = client) {
  const res = await post('/v1/auth/passkey/options', { client_id: app.app.id });
  expect(res.statusCode, res.body).toBe(200);
  return res.json();
}

const signIn = (response: unknown, app: TestClient = client) =>
  post('/v1/auth/passkey/verify', { client_id: app.app.id, response, ...(app.secret ? { client_secret: app.secret } : {}) });

const passkeysOf = (userId: string) => countAll(t.db, 'passkeys', { user_id: userId });

beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
  client = await makeClient(t, { name: 'Passkey App', redirectUris: [`${APP_ORIGIN}/cb`] });
});

afterAll(async () => {
  expectNoSecretsInLogs(t.logs, secrets, 8);
  await t.close();
});

describe('REST: a passkey an app registers (apps with their own UI)', () => {
  it('registers a discoverable, user-verified passkey for the app with its access token, and signs in with it there: amr swk', async () => {
    const user = await makeUser(t.app, { name: 'Pat Key', email_verified: 1 });
    const token = await accessTokenOf(user.email, user.password);
    const options = await post('/v1/auth/passkey/register/options', {}, { authorization: `Bearer ${token}` });
    expect(options.statusCode).toBe(200);
    expect(options.headers['cache-control']).toBe('no-store');
    const creation = options.json();
    expect(creation).toMatchObject({
      rp: { id: 'localhost', name: 'Gatehouse' },
      user: { id: Buffer.from(user.id).toString('base64url'), name: user.email, displayName: 'Pat Key' },
      authenticatorSelection: { residentKey: 'required', requireResidentKey: true, userVerification: 'required' },
      attestation: 'none',
      excludeCredentials: [],
    });

    const authenticator = new SoftAuthenticator({ origin: APP_ORIGIN });
    const registered = await post('/v1/auth/passkey/register/verify', { response: authenticator.create(creation), name: 'Work laptop' }, { authorization: `Bearer ${token}` });
    expect(registered.statusCode, registered.body).toBe(201);
    // Scoped to the app: no second factor of the account, so no recovery codes either.
    expect(registered.json()).toEqual({
      id: expect.stringMatching(/^pk_/),
      name: 'Work laptop',
      device_type: 'singleDevice',
      backed_up: false,
      app_id: client.app.id,
      created_at: expect.any(String),
      last_used_at: null,
    });
    const stored = await t.db.selectFrom('passkeys').selectAll().where('user_id', '=', user.id).executeTakeFirstOrThrow();
    expect(stored).toMatchObject({ credential_id: authenticator.credentials[0]!.id, counter: 0, transports: '["internal"]', device_type: 'singleDevice', backed_up: 0, name: 'Work laptop', app_id: client.app.id, last_used_at: null });
    expect(await countAll(t.db, 'recovery_codes', { user_id: user.id })).toBe(0);
    const event = await t.db.selectFrom('events').selectAll().where('type', '=', 'passkey.registered').where('user_id', '=', user.id).executeTakeFirstOrThrow();
    expect(JSON.parse(event.data)).toEqual({ passkey_id: registered.json().id, device_type: 'singleDevice', backed_up: false, via: 'api', scope: 'app' });
    expect(event.app_id).toBe(client.app.id);
    // Still no factor: the password alone signs in, here and everywhere.
    expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.app.id })).json()).toMatchObject({ status: 'ok' });

    const request = await signInOptions();
    expect(request).toMatchObject({ rpId: 'localhost', userVerification: 'required', allowCredentials: [] });
    // The test clock follows the wall clock: the stamp is read between these two, not at one second.
    const signInStarted = t.clock.now();
    const res = await signIn(authenticator.get(request));
    const signInAnswered = t.clock.now();
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ status: 'ok', token_type: 'Bearer', user: { id: user.id, email: user.email } });
    secrets.push(body.access_token, body.refresh_token);
    // No attestation was asked for: nothing proves the key is hardware, so the sign-in says `swk`.
    expect(decodeJwt(body.id_token)).toMatchObject({ sub: user.id, amr: ['swk'], acr: 'urn:gatehouse:acr:2fa' });
    const used = await t.db.selectFrom('passkeys').select(['counter', 'last_used_at']).where('user_id', '=', user.id).executeTakeFirstOrThrow();
    expect(used.counter).toBe(1);
    expect(used.last_used_at).toBeGreaterThanOrEqual(signInStarted);
    expect(used.last_used_at).toBeLessThanOrEqual(signInAnswered);
    const login = await t.db.selectFrom('events').selectAll().where('type', '=', 'user.login_succeeded').where('user_id', '=', user.id).orderBy('id', 'desc').executeTakeFirstOrThrow();
    expect(JSON.parse(login.data)).toMatchObject({ method: 'passkey' });

    // The passkey sign-in's token may add another; the user's passkey is excluded.
    const again = await post('/v1/auth/passkey/register/options', {}, { authorization: `Bearer ${body.access_token}` });
    expect(again.statusCode, again.body).toBe(200);
    expect(again.json().excludeCredentials).toEqual([{ id: authenticator.credentials[0]!.id, type: 'public-key', transports: ['internal'] }]);
    const second = new SoftAuthenticator({ origin: APP_ORIGIN });
    const added = await post('/v1/auth/passkey/register/verify', { response: second.create(again.json()) }, { authorization: `Bearer ${body.access_token}` });
    expect(added.statusCode, added.body).toBe(201);
    expect(added.json().app_id).toBe(client.app.id);
  });

  it('an account whose address is not verified gets no passkey from an app (nor an account-wide one)', async () => {
    const user = await makeUser(t.app);
    const token = await accessTokenOf(user.email, user.password);
    const refused = await post('/v1/auth/passkey/register/options', {}, { authorization: `Bearer ${token}` });
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toEqual({ code: 'forbidden', message: 'The user must verify their email address before a passkey can be added.' });
    expect(await countAll(t.db, 'one_time_tokens', { user_id: user.id, kind: 'passkey_registration' })).toBe(0);
    // Positive control: the same user, verified since, may.
    await t.db.updateTable('users').set({ email_verified: 1 }).where('id', '=', user.id).execute();
    expect((await post('/v1/auth/passkey/register/options', {}, { authorization: `Bearer ${token}` })).statusCode).toBe(200);
  });

  it('a synced passkey signs in with amr swk and its backup state is kept', async () => {
    const { user, authenticator, passkey } = await userWithAppPasskey({ synced: true });
    expect(passkey).toMatchObject({ device_type: 'multiDevice', backed_up: true });
    const res = await signIn(authenticator.get(await signInOptions()));
    expect(res.statusCode, res.body).toBe(200);
    expect(decodeJwt(res.json().id_token)).toMatchObject({ sub: user.id, amr: ['swk'] });
  });

  it('an answer works once: the same assertion again is refused, and changes nothing', async () => {
    const { authenticator } = await userWithAppPasskey();
    const answer = authenticator.get(await signInOptions());
    expect((await signIn(answer)).statusCode).toBe(200);
    const replay = await signIn(answer);
    expect(replay.statusCode).toBe(400);
    expect(replay.json()).toMatchObject({ code: 'invalid_token', message: expect.stringContaining('used or expired') });
  });

  it('a signature counter that does not advance is refused (a cloned authenticator); the next real one works', async () => {
    const { user, authenticator } = await userWithAppPasskey();
    expect((await signIn(authenticator.get(await signInOptions()))).statusCode).toBe(200); // counter 1
    expect((await signIn(authenticator.get(await signInOptions()))).statusCode).toBe(200); // counter 2
    const cloned = await signIn(authenticator.get(await signInOptions(), { signCount: 2 }));
    expect(cloned.statusCode).toBe(401);
    expect(cloned.json()).toMatchObject({ code: 'invalid_credentials', message: 'The passkey could not be verified.' });
    const lower = await signIn(authenticator.get(await signInOptions(), { signCount: 1 }));
    expect(lower.statusCode).toBe(401);
    expect((await t.db.selectFrom('passkeys').select('counter').where('user_id', '=', user.id).executeTakeFirstOrThrow()).counter).toBe(2);
    expect((await signIn(authenticator.get(await signInOptions(), { signCount: 7 }))).statusCode).toBe(200);
  });

  it('a challenge is bound to the app that asked for it, and expires', async () => {
    const { authenticator } = await userWithAppPasskey();
    const other = await makeClient(t, { name: 'Other App', redirectUris: [`${APP_ORIGIN}/other`] });
    const foreign = await signIn(authenticator.get(await signInOptions(other)));
    expect(foreign.statusCode).toBe(400);
    expect(foreign.json().code).toBe('invalid_token');

    const late = authenticator.get(await signInOptions());
    t.clock.advance(301);
    const expired = await signIn(late);
    expect(expired.statusCode).toBe(400);
    expect(expired.json().code).toBe('invalid_token');
  });

  it('refuses an answer from another origin, or without user verification', async () => {
    const { authenticator } = await userWithAppPasskey();
    const phished = await signIn(authenticator.get(await signInOptions(), { origin: 'https://evil.example' }));
    expect(phished.statusCode).toBe(401);
    expect(phished.json().code).toBe('invalid_credentials');
    const presenceOnly = await signIn(authenticator.get(await signInOptions(), { uv: false }));
    expect(presenceOnly.statusCode).toBe(401);
    // The hosted origin is always accepted.
    expect((await signIn(authenticator.get(await signInOptions(), { origin: AUTH_ORIGIN }))).statusCode).toBe(200);
  });

  it('a passkey the server does not know (another authenticator) cannot sign in', async () => {
    const stranger = new SoftAuthenticator({ origin: APP_ORIGIN });
    stranger.create({ challenge: 'AAAA', rp: { id: 'localhost' }, user: { id: Buffer.from('usr_nobody').toString('base64url') } });
    const res = await signIn(stranger.get(await signInOptions()));
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('invalid_credentials');
  });

  it('a confidential app authenticates on verify; an account-wide passkey signs in at any app; disabled users are refused after a valid passkey', async () => {
    const confidential = await makeClient(t, { type: 'confidential', redirectUris: [`${APP_ORIGIN}/conf`] });
    const { user, authenticator } = await userWithAccountPasskey();
    const answer = authenticator.get(await signInOptions(confidential));
    const anonymous = await post('/v1/auth/passkey/verify', { client_id: confidential.app.id, response: answer });
    expect(anonymous.statusCode).toBe(401);
    expect(anonymous.json().code).toBe('invalid_client');
    expect((await signIn(authenticator.get(await signInOptions(confidential)), confidential)).statusCode).toBe(200);

    await t.db.updateTable('users').set({ status: 'disabled' }).where('id', '=', user.id).execute();
    const disabled = await signIn(authenticator.get(await signInOptions()));
    expect(disabled.statusCode).toBe(403);
    expect(disabled.json().code).toBe('user_disabled');
  });

  it('registration: one answer, to a challenge of the same user and app, from an allowed origin', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const token = await accessTokenOf(user.email, user.password);
    const bearer = { authorization: `Bearer ${token}` };
    const authenticator = new SoftAuthenticator({ origin: APP_ORIGIN });
    const creation = (await post('/v1/auth/passkey/register/options', {}, bearer)).json();

    const phished = await post('/v1/auth/passkey/register/verify', { response: authenticator.create(creation, { origin: 'https://evil.example' }) }, bearer);
    expect(phished.statusCode).toBe(400);
    expect(phished.json()).toMatchObject({ code: 'invalid_request', message: expect.stringContaining('could not be registered') });
    // That answer used the challenge up.
    const reuse = await post('/v1/auth/passkey/register/verify', { response: authenticator.create(creation) }, bearer);
    expect(reuse.json().code).toBe('invalid_token');

    const someoneElse = await makeUser(t.app, { email_verified: 1 });
    const otherToken = await accessTokenOf(someoneElse.email, someoneElse.password);
    const fresh = (await post('/v1/auth/passkey/register/options', {}, bearer)).json();
    const crossUser = await post('/v1/auth/passkey/register/verify', { response: authenticator.create(fresh) }, { authorization: `Bearer ${otherToken}` });
    expect(crossUser.statusCode).toBe(400);
    expect(crossUser.json().code).toBe('invalid_token');
    expect(await passkeysOf(user.id)).toBe(0);
    expect(await passkeysOf(someoneElse.id)).toBe(0);
  });

  it('CORS for the app\'s origins (docs/reference/rest-api.md#cors): answers, errors and preflights', async () => {
    const origin = { origin: APP_ORIGIN };
    const options = await post('/v1/auth/passkey/options', { client_id: client.app.id }, origin);
    expect(options.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
    const refused = await post('/v1/auth/passkey/verify', { client_id: client.app.id, response: 'x' }, origin);
    expect(refused.statusCode).toBe(400);
    expect(refused.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
    const stranger = await post('/v1/auth/passkey/options', { client_id: client.app.id }, { origin: 'https://evil.example' });
    expect(stranger.headers['access-control-allow-origin']).toBeUndefined();
    const user = await makeUser(t.app, { email_verified: 1 });
    const token = await accessTokenOf(user.email, user.password);
    const bearer = await post('/v1/auth/passkey/register/options', {}, { ...origin, authorization: `Bearer ${token}` });
    expect(bearer.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
    const preflight = await t.app.inject({ method: 'OPTIONS', url: '/v1/auth/passkey/verify', headers: { ...origin, 'access-control-request-method': 'POST' } });
    expect(preflight.statusCode).toBe(204);
    expect(preflight.headers['access-control-allow-origin']).toBe(APP_ORIGIN);
    const wrongMethod = await t.app.inject({ method: 'GET', url: '/v1/auth/passkey/options' });
    expect(wrongMethod.statusCode).toBe(405);
    expect(wrongMethod.json().code).toBe('method_not_allowed');
  });

  it('bad input gets a clear JSON error and changes nothing', async () => {
    const unauthenticated = await post('/v1/auth/passkey/register/options', {});
    expect(unauthenticated.statusCode).toBe(401);
    expect(unauthenticated.json().code).toBe('unauthorized');
    const noClient = await post('/v1/auth/passkey/options', {});
    expect(noClient.statusCode).toBe(400);
    expect(noClient.json().code).toBe('invalid_request');
    for (const response of [undefined, 'x', { id: 'abc', rawId: 'abc', type: 'public-key', response: {} }]) {
      const res = await post('/v1/auth/passkey/verify', { client_id: client.app.id, response });
      expect(res.statusCode, JSON.stringify(response)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    const garbage = { id: 'abc', rawId: 'abc', type: 'public-key', response: { clientDataJSON: 'bm90IGpzb24', authenticatorData: 'AAAA', signature: 'AAAA' }, clientExtensionResults: {} };
    const notJson = await post('/v1/auth/passkey/verify', { client_id: client.app.id, response: garbage });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.json().code).toBe('invalid_request');
    const unknownChallenge = { ...garbage, response: { ...garbage.response, clientDataJSON: Buffer.from(JSON.stringify({ type: 'webauthn.get', challenge: 'nope', origin: AUTH_ORIGIN })).toString('base64url') } };
    const unknown = await post('/v1/auth/passkey/verify', { client_id: client.app.id, response: unknownChallenge });
    expect(unknown.statusCode).toBe(400);
    expect(unknown.json().code).toBe('invalid_token');
  });
});

describe('an app\'s token never adds a credential that opens the account elsewhere (takeover through factors)', () => {
  /** The attack: app A's developer holds a user's access token from A's ordinary sign-in and registers a key A controls. */
  async function appDeveloperRegistersKey(app: TestClient, token: string) {
    const key = new SoftAuthenticator({ origin: APP_ORIGIN });
    const options = await post('/v1/auth/passkey/register/options', {}, { authorization: `Bearer ${token}` });
    expect(options.statusCode, options.body).toBe(200);
    const registered = await post('/v1/auth/passkey/register/verify', { response: key.create(options.json()) }, { authorization: `Bearer ${token}` });
    expect(registered.statusCode, registered.body).toBe(201);
    expect(registered.json()).not.toHaveProperty('recovery_codes');
    expect(registered.json().app_id).toBe(app.app.id);
    return key;
  }

  it('the key signs in at A only: not at app B, not at an app that requires MFA, not on the hosted pages or the console', async () => {
    const appA = await makeClient(t, { name: 'App A', redirectUris: [`${APP_ORIGIN}/a`] });
    const appB = await makeClient(t, { name: 'App B', redirectUris: [`${APP_ORIGIN}/b`] });
    const strict = await makeClient(t, { name: 'Strict App', redirectUris: [`${APP_ORIGIN}/strict`], mfa: 'required' });
    const victim = await makeUser(t.app, { email_verified: 1 });
    const key = await appDeveloperRegistersKey(appA, await accessTokenOf(victim.email, victim.password, appA));

    for (const other of [appB, strict]) {
      const res = await signIn(key.get(await signInOptions(other)), other);
      expect(res.statusCode, res.body).toBe(401);
      expect(res.json()).toEqual({ code: 'invalid_credentials', message: 'This passkey was added by another app and signs in only there. Use another way to sign in.' });
    }

    // The hosted sign-in page (and so the console, which signs in through it) refuses it.
    const browser = new Browser(t.app);
    const consoleLogin = await browser.get('/console/login');
    expect(consoleLogin.statusCode).toBe(303);
    const authorize = await browser.get(relative(consoleLogin.headers.location!));
    expect(authorize.headers.location).toContain('/login');
    const loginUrl = relative(authorize.headers.location!);
    const csrf = csrfOf((await browser.get(loginUrl)).body);
    const request = (await pageOptions(browser, '/login/passkey/options', csrf)).json();
    const refused = await browser.post(loginUrl.replace('/login', '/login/passkey'), { csrf, action: 'passkey', response: JSON.stringify(key.get(request, { origin: AUTH_ORIGIN })) });
    expect(refused.statusCode).toBe(401);
    expect(refused.body).toContain('signs in only there');
    expect((await browser.get('/account')).body).not.toContain(victim.email);

    // The person's own password sign-in at B asks for no passkey they never made; an app that requires
    // MFA has them set one up (the key is no factor and is not offered).
    expect((await post('/v1/auth/login', { email: victim.email, password: victim.password, client_id: appB.app.id })).json()).toMatchObject({ status: 'ok' });
    const strictLogin = (await post('/v1/auth/login', { email: victim.email, password: victim.password, client_id: strict.app.id })).json();
    expect(strictLogin).toMatchObject({ status: 'pending', next_step: 'mfa', methods: [], enroll: ['totp'] });
    const mfaOptions = await post('/v1/auth/mfa/passkey/options', { session: strictLogin.session, client_id: strict.app.id });
    expect(mfaOptions.json().allowCredentials).toEqual([]);
    const asFactor = await post('/v1/auth/mfa/verify', { session: strictLogin.session, client_id: strict.app.id, passkey: key.get(mfaOptions.json(), { credential: key.credentials[0] }) });
    expect(asFactor.json()).toMatchObject({ code: 'invalid_credentials' });

    // Positive control: at A, the key signs in.
    const atA = await signIn(key.get(await signInOptions(appA)), appA);
    expect(atA.statusCode, atA.body).toBe(200);
    secrets.push(atA.json().access_token, atA.json().refresh_token);
  });

  it('on an account with a factor, A\'s token from a two-factor sign-in still adds a key for A alone; the account\'s factors are unchanged', async () => {
    const appA = await makeClient(t, { name: 'App A2', redirectUris: [`${APP_ORIGIN}/a2`] });
    const appB = await makeClient(t, { name: 'App B2', redirectUris: [`${APP_ORIGIN}/b2`] });
    const { user, authenticator } = await userWithAccountPasskey();
    const account = authenticator.credentials[0]!.id;
    // A's sign-in with both factors, as the person would do it at A.
    const pending = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: appA.app.id })).json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'mfa', methods: ['passkey', 'recovery_code'] });
    const factorOptions = (await post('/v1/auth/mfa/passkey/options', { session: pending.session, client_id: appA.app.id })).json();
    const done = await post('/v1/auth/mfa/verify', { session: pending.session, client_id: appA.app.id, passkey: authenticator.get(factorOptions) });
    expect(done.statusCode, done.body).toBe(200);
    secrets.push(done.json().access_token, done.json().refresh_token);
    const before = await t.app.mfa.overview(t.db, user.id);
    const key = await appDeveloperRegistersKey(appA, done.json().access_token);

    expect(await t.app.mfa.overview(t.db, user.id)).toEqual(before);
    const atB = await signIn(key.get(await signInOptions(appB)), appB);
    expect(atB.json()).toMatchObject({ code: 'invalid_credentials' });
    const pendingAtB = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: appB.app.id })).json();
    const options = (await post('/v1/auth/mfa/passkey/options', { session: pendingAtB.session, client_id: appB.app.id })).json();
    expect(options.allowCredentials.map((c: { id: string }) => c.id)).toEqual([account]);
  });

  it('the person sees the key on the account page, named after its app, and can remove it', async () => {
    const appA = await makeClient(t, { name: 'Snoopy Games', redirectUris: [`${APP_ORIGIN}/a3`] });
    const victim = await makeUser(t.app, { email_verified: 1 });
    await appDeveloperRegistersKey(appA, await accessTokenOf(victim.email, victim.password, appA));
    const browser = new Browser(t.app);
    await browser.submit('/account', { email: victim.email, password: victim.password, action: 'login' });
    const page = await browser.get('/account');
    expect(page.body).toContain('Signs in only at Snoopy Games');
    const id = /name="passkey_id" value="(pk_[^"]+)"/.exec(page.body)![1]!;
    const removed = await browser.post('/account/passkeys', { csrf: csrfOf(page.body), action: 'remove_passkey', passkey_id: id });
    expect(removed.statusCode).toBe(303);
    expect(await passkeysOf(victim.id)).toBe(0);
  });
});

describe('the second-factor interface (used by the MFA step)', () => {
  it('options list the user\'s account-wide passkeys; the answer proves that user, once, with the kept challenge', async () => {
    const { user, authenticator } = await userWithAccountPasskey();
    const options = await t.app.passkeys.authenticationOptions({ userId: user.id });
    expect(options.allowCredentials).toEqual([{ id: authenticator.credentials[0]!.id, type: 'public-key', transports: ['internal'] }]);
    const answer = authenticator.get(options);
    await expect(t.app.passkeys.verifyAuthentication({ userId: user.id, response: answer, appId: null, secondFactor: true, challenge: 'another-challenge' })).rejects.toMatchObject({ code: 'invalid_token' });
    const second = authenticator.get(await t.app.passkeys.authenticationOptions({ userId: user.id }));
    await expect(t.app.passkeys.verifyAuthentication({ userId: 'usr_someone_else', response: second, appId: null, secondFactor: true })).rejects.toMatchObject({ code: 'invalid_token' });
    const third = await t.app.passkeys.authenticationOptions({ userId: user.id });
    await expect(
      t.app.passkeys.verifyAuthentication({ userId: user.id, response: authenticator.get(third, { origin: AUTH_ORIGIN }), appId: null, secondFactor: true, challenge: third.challenge }),
    ).resolves.toEqual({ userId: user.id, amr: ['swk'], passkeyId: expect.stringMatching(/^pk_/) });
  });
});

describe('hosted pages: /account and /login (the page script\'s requests)', () => {
  it('adds, lists, renames and removes a passkey on /account; it signs in on /login until removed', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const browser = new Browser(t.app);
    const signedIn = await browser.submit('/account', { email: user.email, password: user.password, action: 'login' });
    expect(signedIn.statusCode).toBe(303);
    let page = await browser.get('/account');
    expect(page.body).toContain('id="passkey-add"');
    expect(page.body).toContain('/assets/simplewebauthn.js?v=');
    const csrf = csrfOf(page.body);

    expect((await pageOptions(browser, '/account/passkeys/options', 'wrong')).statusCode).toBe(403);
    const options = await pageOptions(browser, '/account/passkeys/options', csrf);
    expect(options.statusCode, options.body).toBe(200);
    const authenticator = new SoftAuthenticator({ origin: AUTH_ORIGIN });
    const added = await browser.post('/account/passkeys', { csrf, action: 'add_passkey', name: 'Phone', response: JSON.stringify(authenticator.create(options.json())) });
    // The first factor of the account: its recovery codes are shown once, then on to the passkeys.
    expect(added.statusCode, added.body).toBe(200);
    expect([...added.body.matchAll(/data-field="recovery_code"/g)]).toHaveLength(10);
    expect(added.body).toContain('href="/account#passkeys"');
    page = await browser.get('/account');
    expect(page.body).toContain('value="Phone"');
    const id = /name="passkey_id" value="(pk_[^"]+)"/.exec(page.body)![1]!;

    const renamed = await browser.post('/account/passkeys', { csrf, action: 'rename_passkey', passkey_id: id, name: 'My phone' });
    expect(renamed.statusCode).toBe(303);
    expect((await browser.get('/account')).body).toContain('value="My phone"');
    const badName = await browser.post('/account/passkeys', { csrf, action: 'rename_passkey', passkey_id: id, name: 'a\u0000b' });
    expect(badName.statusCode).toBe(400);
    expect(badName.headers['content-type']).toMatch(/text\/html/);
    // The password session may not remove (or add) a factor now that the account has one.
    const tooWeak = await browser.post('/account/passkeys', { csrf, action: 'remove_passkey', passkey_id: id });
    expect(tooWeak.headers.location).toBe('/account?mfa_error=change#mfa');
    expect((await pageOptions(browser, '/account/passkeys/options', csrf)).statusCode).toBe(403);
    expect(await passkeysOf(user.id)).toBe(1);

    // Signed out, the passkey signs in on /login (challenge bound to this browser session).
    await browser.post('/account', { csrf, action: 'logout' });
    const login = await browser.get('/login');
    expect(login.body).toContain('id="passkey-signin"');
    expect(login.body).toContain('autocomplete="username webauthn"');
    const loginCsrf = csrfOf(login.body);
    const request = await pageOptions(browser, '/login/passkey/options', loginCsrf);
    expect(request.statusCode).toBe(200);
    expect(request.json().allowCredentials).toEqual([]);
    const answer = authenticator.get(request.json());

    const otherBrowser = new Browser(t.app);
    const otherCsrf = csrfOf((await otherBrowser.get('/login')).body);
    const stolen = await otherBrowser.post('/login/passkey', { csrf: otherCsrf, action: 'passkey', response: JSON.stringify(answer) });
    expect(stolen.statusCode).toBe(400); // the challenge belongs to the first browser (and is now used)

    const again = authenticator.get((await pageOptions(browser, '/login/passkey/options', loginCsrf)).json());
    const done = await browser.post('/login/passkey', { csrf: loginCsrf, action: 'passkey', response: JSON.stringify(again) });
    expect(done.statusCode, done.body).toBe(303);
    expect(done.headers.location).toBe('/account');
    page = await browser.get('/account');
    expect(page.body).toContain(user.email);

    const newCsrf = csrfOf(page.body);
    const notMine = await browser.post('/account/passkeys', { csrf: newCsrf, action: 'remove_passkey', passkey_id: 'pk_not_mine' });
    expect(notMine.statusCode).toBe(404);
    const removed = await browser.post('/account/passkeys', { csrf: newCsrf, action: 'remove_passkey', passkey_id: id });
    expect(removed.statusCode).toBe(303);
    const event = await t.db.selectFrom('events').selectAll().where('type', '=', 'passkey.removed').where('user_id', '=', user.id).executeTakeFirstOrThrow();
    expect(JSON.parse(event.data)).toEqual({ passkey_id: id, via: 'account' });
    expect(await passkeysOf(user.id)).toBe(0);

    await browser.post('/account', { csrf: newCsrf, action: 'logout' });
    const relogin = await browser.get('/login');
    const reCsrf = csrfOf(relogin.body);
    const gone = authenticator.get((await pageOptions(browser, '/login/passkey/options', reCsrf)).json());
    const refused = await browser.post('/login/passkey', { csrf: reCsrf, action: 'passkey', response: JSON.stringify(gone) });
    expect(refused.statusCode).toBe(401);
    expect(refused.body).toContain('could not be verified');
  });

  it('an account whose address is not verified offers no passkey to add, and its options and form refuse', async () => {
    const user = await makeUser(t.app);
    const browser = new Browser(t.app);
    await browser.submit('/account', { email: user.email, password: user.password, action: 'login' });
    const page = await browser.get('/account');
    expect(page.body).not.toContain('id="passkey-add"');
    expect(page.body).toContain('Verify your email address to add a passkey.');
    const csrf = csrfOf(page.body);
    const options = await pageOptions(browser, '/account/passkeys/options', csrf);
    expect(options.statusCode).toBe(403);
    expect(options.json()).toEqual({ code: 'forbidden', message: 'Verify your email address first, then add a passkey.' });
    const form = await browser.post('/account/passkeys', { csrf, action: 'add_passkey', response: '{}' });
    expect(form.headers.location).toBe('/account?mfa_error=verify_email#mfa');
    expect((await browser.get(form.headers.location!)).body).toContain('Verify your email address first: then you can add a second factor.');
    expect(await passkeysOf(user.id)).toBe(0);
  });

  it('the forms need the session\'s CSRF token, a signed-in user for /account, and a real answer', async () => {
    const browser = new Browser(t.app);
    const csrf = csrfOf((await browser.get('/login')).body);
    expect((await browser.post('/login/passkey', { action: 'passkey', response: '{}' })).statusCode).toBe(403);
    const notJson = await browser.post('/login/passkey', { csrf, action: 'passkey', response: 'not json' });
    expect(notJson.statusCode).toBe(400);
    expect(notJson.headers['content-type']).toMatch(/text\/html/);
    expect((await browser.post('/account/passkeys', { csrf, action: 'add_passkey', response: '{}' })).statusCode).toBe(401);
    expect((await pageOptions(browser, '/account/passkeys/options', csrf)).statusCode).toBe(401);
    const zh = await browser.post('/login/passkey', { csrf, action: 'passkey', response: 'not json' }, { 'accept-language': 'zh-CN' });
    expect(zh.body).toContain('通行密钥');
  });
});

describe('AUTH_URL on an IP address: passkeys are off', () => {
  let ip: TestApp;
  let ipClient: TestClient;
  beforeAll(async () => {
    ip = await buildTestApp({ env: { BASE_URL: 'http://127.0.0.1:3000' } });
    ipClient = await makeClient(ip, { redirectUris: [`${APP_ORIGIN}/cb`] });
  });
  afterAll(async () => ip.close());

  it('start-up says why once; the routes answer feature_disabled with the reason; the pages offer no passkeys', async () => {
    const lines = ip.logs.filter((line) => line.includes('passkeys are off'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toContain('127.0.0.1 is an IP address');

    const res = await ip.app.inject({ method: 'POST', url: '/v1/auth/passkey/options', payload: { client_id: ipClient.app.id } });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toEqual({ code: 'feature_disabled', message: expect.stringMatching(/^Passkeys are off on this server: .*127\.0\.0\.1 is an IP address/) });
    for (const url of ['/v1/auth/passkey/verify', '/v1/auth/passkey/register/options', '/v1/auth/passkey/register/verify', '/login/passkey/options', '/account/passkeys/options']) {
      const refused = await ip.app.inject({ method: 'POST', url, payload: {} });
      expect(refused.statusCode, url).toBe(403);
      expect(refused.json().code, url).toBe('feature_disabled');
    }

    const browser = new Browser(ip.app);
    const login = await browser.get('/login');
    expect(login.body).not.toContain('passkey');
    expect(login.body).toContain('autocomplete="username"');
    const user = await makeUser(ip.app);
    await browser.submit('/account', { email: user.email, password: user.password, action: 'login' });
    const account = await browser.get('/account');
    expect(account.body).toContain(user.email);
    expect(account.body).not.toContain('passkey');
    const csrf = csrfOf(account.body);
    const add = await browser.post('/account/passkeys', { csrf, action: 'add_passkey', response: '{}' });
    expect(add.statusCode).toBe(403);
  });
});

describe('a passkey as the second factor of a password sign-in', () => {
  it('REST: pending mfa offers the passkey; only a passkey of that user, answering this app, completes it', async () => {
    const { user, authenticator } = await userWithAccountPasskey();
    const stranger = await userWithAccountPasskey();
    const pending = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.app.id })).json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'mfa', methods: ['passkey', 'recovery_code'] });
    const mfaOptions = (session: string) => post('/v1/auth/mfa/passkey/options', { session, client_id: client.app.id });
    const verify = (session: string, body: Record<string, unknown>) => post('/v1/auth/mfa/verify', { session, client_id: client.app.id, ...body });

    const options = await mfaOptions(pending.session);
    expect(options.statusCode, options.body).toBe(200);
    expect(options.json().allowCredentials).toEqual([{ id: authenticator.credentials[0]!.id, type: 'public-key', transports: ['internal'] }]);
    // The ceremony may run on the app's page (its origin) as well as on Gatehouse's.
    // Another user's passkey answering this user's challenge is refused, and uses up the challenge.
    const strangersAnswer = stranger.authenticator.get(options.json(), { credential: stranger.authenticator.credentials[0] });
    expect((await verify(pending.session, { passkey: strangersAnswer })).json()).toMatchObject({ code: 'invalid_credentials' });
    // Neither both proofs nor none.
    expect((await verify(pending.session, {})).statusCode).toBe(400);
    const fresh = (await mfaOptions(pending.session)).json();
    expect((await verify(pending.session, { code: '123456', passkey: authenticator.get(fresh) })).json()).toMatchObject({ code: 'invalid_request' });

    const ok = await verify(pending.session, { passkey: authenticator.get((await mfaOptions(pending.session)).json(), { origin: APP_ORIGIN }) });
    expect(ok.statusCode, ok.body).toBe(200);
    secrets.push(ok.json().access_token, ok.json().refresh_token);
    expect(decodeJwt(ok.json().id_token)).toMatchObject({ sub: user.id, amr: ['pwd', 'swk', 'mfa'], acr: 'urn:gatehouse:acr:2fa' });
    const login = await t.db.selectFrom('events').selectAll().where('type', '=', 'user.login_succeeded').where('user_id', '=', user.id).orderBy('id', 'desc').executeTakeFirstOrThrow();
    expect(JSON.parse(login.data)).toMatchObject({ method: 'passkey', amr: ['pwd', 'swk', 'mfa'] });
  });

  it('hosted: /mfa offers the passkey (page script options bound to the pending user) and signs the browser in', async () => {
    const { user, authenticator } = await userWithAccountPasskey();
    const browser = new Browser(t.app);
    const login = await browser.submit('/login', { email: user.email, password: user.password, action: 'login' });
    expect(login.headers.location).toMatch(/^\/mfa/);
    const page = await browser.get('/mfa');
    expect(page.body).toContain('data-webauthn-options="/mfa/passkey/options"');
    expect(page.body).toContain('name="code"'); // the recovery codes, without JavaScript
    const csrf = csrfOf(page.body);
    // Only a browser with a pending second step gets options, and only for that user's passkeys.
    const other = new Browser(t.app);
    const otherCsrf = csrfOf((await other.get('/login')).body);
    expect((await pageOptions(other, '/mfa/passkey/options', otherCsrf)).json()).toMatchObject({ code: 'invalid_request' });
    const options = await pageOptions(browser, '/mfa/passkey/options', csrf);
    expect(options.statusCode, options.body).toBe(200);
    expect(options.json().allowCredentials.map((c: { id: string }) => c.id)).toEqual([authenticator.credentials[0]!.id]);

    const done = await browser.post('/mfa', { csrf, action: 'passkey', response: JSON.stringify(authenticator.get(options.json())) });
    expect(done.statusCode, done.body).toBe(303);
    expect(done.headers.location).toBe('/account');
    const account = await browser.get('/account');
    expect(account.body).toContain(user.email);
    // The session now counts as two factors: it may remove the passkey.
    const id = /name="passkey_id" value="(pk_[^"]+)"/.exec(account.body)![1]!;
    const removed = await browser.post('/account/passkeys', { csrf: csrfOf(account.body), action: 'remove_passkey', passkey_id: id });
    expect(removed.headers.location).toBe('/account#passkeys');
  });
});

