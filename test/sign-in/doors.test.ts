import type { LightMyRequestResponse } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret } from '../../src/shared/ids.js';
import { recordAppSignIn, setAppUserStatus } from '../../src/storage/repos/app-users.js';
import type { App } from '../../src/storage/repos/apps.js';
import { revokeConsent } from '../../src/storage/repos/consents.js';
import { findUserByEmail, findUserById, updateUser, type UserRow } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import {
  authorizeAndGetCode,
  authorizeUrl,
  Browser,
  csrfOf,
  exchangeCode,
  makeClient,
  pkcePair,
  relative,
  tokenRequest,
  type TestClient,
  uniqueEmail,
} from '../helpers/oauth-flows.js';
import { CODE_BASIS_CASES, MAY_SIGN_IN_CASES, type MaySignInCase } from './policy-cases.js';

/**
 * The sign-in rules at every door, black box through `app.inject`: client authentication on the token
 * issuing `/v1/auth/*` routes and `/oauth/token`; the MAY_SIGN_IN table at REST login, `/oauth/authorize`
 * and code redemption; PKCE challenge syntax; control characters in names; `/v1/auth/profile/complete`
 * (only missing fields, single use); codes re-checking their basis at redemption.
 */

const ENV = { IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0' };
const PASSWORD = 'correct horse battery staple';

type Inject = (url: string, payload: Record<string, unknown>, headers?: Record<string, string>) => Promise<LightMyRequestResponse>;
const poster = (getT: () => TestApp): Inject => (url, payload, headers = {}) => getT().app.inject({ method: 'POST', url, payload, headers });

const basic = (id: string, secret: string) => ({ authorization: `Basic ${Buffer.from(`${encodeURIComponent(id)}:${encodeURIComponent(secret)}`).toString('base64')}` });

function expectV1Error(res: LightMyRequestResponse, status: number, code: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json()).toMatchObject({ code });
  expect(res.json().access_token).toBeUndefined();
  expect(res.json().refresh_token).toBeUndefined();
}

function expectOAuthError(res: LightMyRequestResponse, status: number, error: string) {
  expect(res.statusCode, res.body).toBe(status);
  expect(res.json()).toMatchObject({ error });
  expect(res.json().access_token).toBeUndefined();
}

/** The newest mail to `to` in the outbox carrying a `token=` of `prefix`. */
async function tokenFromMail(t: TestApp, to: string, prefix: 'ml' | 'pr'): Promise<string> {
  const mails = await t.app.mailer.recent(100);
  for (const mail of mails) {
    if (mail.to !== to) continue;
    const m = new RegExp(`token=(${prefix}_[A-Za-z0-9_-]+)`).exec(mail.text);
    if (m) return m[1]!;
  }
  throw new Error(`no ${prefix} token mailed to ${to}`);
}

const eventsOf = (t: TestApp, userId: string, type: string) =>
  t.db.selectFrom('events').select(['type', 'app_id', 'data']).where('user_id', '=', userId).where('type', '=', type).execute();

/** Puts a user into a MAY_SIGN_IN row's state for an app. */
async function arrange(t: TestApp, user: UserRow, appId: string, c: Pick<MaySignInCase, 'userStatus' | 'membership'>) {
  if (c.membership === 'none') {
    await t.db.deleteFrom('app_users').where('app_id', '=', appId).where('user_id', '=', user.id).execute();
  } else {
    await recordAppSignIn(t.db, appId, user.id, t.clock.now());
    await setAppUserStatus(t.db, appId, user.id, c.membership);
  }
  await updateUser(t.db, user.id, { status: c.userStatus });
}

// ---------------------------------------------------------------------------------------------------

describe('client authentication at the doors that issue or rotate tokens', () => {
  let t: TestApp;
  const post = poster(() => t);
  const SECRET = 's3cret-confidential-app-0001';
  let conf: App;
  let pub: App;

  beforeAll(async () => {
    t = await buildTestApp({ env: ENV });
    conf = await makeApp(t.db, { clientSecret: SECRET });
    pub = await makeApp(t.db);
  });
  afterAll(async () => t.close());

  it('/v1/auth/login: a confidential app without its secret → 401 invalid_client; Basic or body secret → 200; wrong → 401', async () => {
    const user = await makeUser(t.app, { password: PASSWORD });
    const creds = { email: user.email, password: PASSWORD };

    const none = await post('/v1/auth/login', { ...creds, client_id: conf.id });
    expectV1Error(none, 401, 'invalid_client');
    expect(none.headers['www-authenticate']).toMatch(/^Basic/);
    expectV1Error(await post('/v1/auth/login', creds, { 'x-client-id': conf.id }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/login', { ...creds, client_id: conf.id, client_secret: 'not-the-secret' }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/login', creds, basic(conf.id, 'not-the-secret')), 401, 'invalid_client');

    const bodySecret = await post('/v1/auth/login', { ...creds, client_id: conf.id, client_secret: SECRET });
    expect(bodySecret.statusCode, bodySecret.body).toBe(200);
    expect(bodySecret.json()).toMatchObject({ status: 'ok', token_type: 'Bearer' });
    const viaBasic = await post('/v1/auth/login', creds, basic(conf.id, SECRET));
    expect(viaBasic.statusCode, viaBasic.body).toBe(200);
    expect(viaBasic.json().status).toBe('ok');

    // A refused client is not a sign-in: only the two authenticated logins were recorded.
    expect(await eventsOf(t, user.id, 'user.login_succeeded')).toHaveLength(2);
  });

  it('/v1/auth/login: a public app needs no secret, and sending one is refused', async () => {
    const user = await makeUser(t.app, { password: PASSWORD });
    const ok = await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: pub.id });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json().status).toBe('ok');
    expectV1Error(await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: pub.id, client_secret: 'anything' }), 401, 'invalid_client');
  });

  it('/v1/auth/register: without the secret → 401 and no account is created; with it (body or Basic) → 201', async () => {
    const refused = uniqueEmail('conf-reg');
    expectV1Error(await post('/v1/auth/register', { email: refused, password: PASSWORD, client_id: conf.id }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/register', { email: refused, password: PASSWORD, client_id: conf.id, client_secret: 'wrong-secret' }), 401, 'invalid_client');
    expect(await findUserByEmail(t.db, refused)).toBeUndefined();

    const viaBody = await post('/v1/auth/register', { email: uniqueEmail('conf-reg'), password: PASSWORD, client_id: conf.id, client_secret: SECRET });
    expect(viaBody.statusCode, viaBody.body).toBe(201);
    expect(viaBody.json().status).toBe('ok');
    const viaBasic = await post('/v1/auth/register', { email: uniqueEmail('conf-reg'), password: PASSWORD }, basic(conf.id, SECRET));
    expect(viaBasic.statusCode, viaBasic.body).toBe(201);
    // The address refused above is still free.
    expect((await post('/v1/auth/register', { email: refused, password: PASSWORD, client_id: conf.id, client_secret: SECRET })).statusCode).toBe(201);

    const publicReg = await post('/v1/auth/register', { email: uniqueEmail('pub-reg'), password: PASSWORD, client_id: pub.id });
    expect(publicReg.statusCode, publicReg.body).toBe(201);
  });

  it('/v1/auth/refresh: a confidential app\'s refresh token does not rotate without the secret, even with no client_id at all', async () => {
    const user = await makeUser(t.app, { password: PASSWORD });
    const login = (await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: conf.id, client_secret: SECRET })).json();
    const rt = login.refresh_token as string;
    expect(rt).toMatch(/^rt_/);

    expectV1Error(await post('/v1/auth/refresh', { refresh_token: rt }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/refresh', { refresh_token: rt, client_id: conf.id }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/refresh', { refresh_token: rt, client_id: conf.id, client_secret: 'wrong-secret' }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/refresh', { refresh_token: rt }, basic(conf.id, 'wrong-secret')), 401, 'invalid_client');

    // Nothing was rotated by the refused attempts: the same token still works once, with the secret.
    const ok = await post('/v1/auth/refresh', { refresh_token: rt, client_id: conf.id, client_secret: SECRET });
    expect(ok.statusCode, ok.body).toBe(200);
    const rotated = ok.json().refresh_token as string;
    expect(rotated).toMatch(/^rt_/);
    expect(rotated).not.toBe(rt);
    const viaBasic = await post('/v1/auth/refresh', { refresh_token: rotated }, basic(conf.id, SECRET));
    expect(viaBasic.statusCode, viaBasic.body).toBe(200);
  });

  it('/v1/auth/refresh: a public app\'s token rotates with or without client_id', async () => {
    const user = await makeUser(t.app, { password: PASSWORD });
    const login = (await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: pub.id })).json();
    const first = await post('/v1/auth/refresh', { refresh_token: login.refresh_token });
    expect(first.statusCode, first.body).toBe(200);
    const second = await post('/v1/auth/refresh', { refresh_token: first.json().refresh_token, client_id: pub.id });
    expect(second.statusCode, second.body).toBe(200);
  });

  it('/oauth/token refresh_token grant: a confidential app without its secret → 401 {"error":"invalid_client"}', async () => {
    const user = await makeUser(t.app, { password: PASSWORD });
    const rt = (await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: conf.id, client_secret: SECRET })).json().refresh_token as string;
    const none = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: rt, client_id: conf.id });
    expectOAuthError(none, 401, 'invalid_client');
    expect(none.headers['www-authenticate']).toMatch(/^Basic/);
    expectOAuthError(await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: rt, client_id: conf.id, client_secret: 'wrong-secret' }), 401, 'invalid_client');
    const ok = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: rt, client_id: conf.id, client_secret: SECRET });
    expect(ok.statusCode, ok.body).toBe(200);
    const again = await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: ok.json().refresh_token }, basic(conf.id, SECRET));
    expect(again.statusCode, again.body).toBe(200);
  });

  it('/v1/auth/magic-link/verify: a confidential app without its secret → 401, and the link is not used up', async () => {
    const user = await makeUser(t.app, { password: PASSWORD });
    // Requesting a link only names the app: no secret needed there.
    const request = await post('/v1/auth/magic-link/request', { email: user.email, client_id: conf.id });
    expect(request.statusCode, request.body).toBe(202);
    const token = await tokenFromMail(t, user.email, 'ml');

    expectV1Error(await post('/v1/auth/magic-link/verify', { token, client_id: conf.id }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/magic-link/verify', { token, client_id: conf.id, client_secret: 'wrong-secret' }), 401, 'invalid_client');
    const ok = await post('/v1/auth/magic-link/verify', { token, client_id: conf.id, client_secret: SECRET });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { email: user.email } });
  });

  it('/v1/auth/profile/complete: a confidential app without its secret → 401, and nothing is written', async () => {
    const strict = await makeApp(t.db, { clientSecret: SECRET, requiredFields: ['phone_number'] });
    const email = uniqueEmail('conf-pending');
    const reg = await post('/v1/auth/register', { email, password: PASSWORD, client_id: strict.id, client_secret: SECRET });
    expect(reg.statusCode, reg.body).toBe(201);
    expect(reg.json()).toMatchObject({ status: 'pending', next_step: 'profile', required_fields: ['phone_number'] });
    const session = reg.json().session as string;
    const user = (await findUserByEmail(t.db, email))!;

    expectV1Error(await post('/v1/auth/profile/complete', { session, data: { phone_number: '+14155550100' } }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/profile/complete', { session, client_id: strict.id, data: { phone_number: '+14155550100' } }), 401, 'invalid_client');
    expectV1Error(await post('/v1/auth/profile/complete', { session, client_id: strict.id, client_secret: 'wrong-secret', data: { phone_number: '+14155550100' } }), 401, 'invalid_client');
    expect((await findUserById(t.db, user.id))!.phone_number).toBeNull();
    expect(await eventsOf(t, user.id, 'profile.updated')).toHaveLength(0);

    const ok = await post('/v1/auth/profile/complete', { session, client_id: strict.id, client_secret: SECRET, data: { phone_number: '+1 415 555 0100' } });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { phone_number: '+14155550100' } });
    expect(ok.json().refresh_token).toMatch(/^rt_/);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('MAY_SIGN_IN_CASES at every door', () => {
  let t: TestApp;
  const post = poster(() => t);

  beforeAll(async () => {
    t = await buildTestApp({ env: ENV });
  });
  afterAll(async () => t.close());

  describe('REST /v1/auth/login', () => {
    it.each(MAY_SIGN_IN_CASES)('$name → $expected', async (c) => {
      const client = await makeApp(t.db);
      const user = await makeUser(t.app, { password: PASSWORD });
      await arrange(t, user, client.id, c);
      const res = await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: client.id });
      if (c.expected === null) {
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().status).toBe('ok');
        expect(res.json().access_token).toBeTruthy();
      } else {
        expectV1Error(res, 403, c.expected);
      }
    });
  });

  describe('GET /oauth/authorize with a signed-in browser', () => {
    it.each(MAY_SIGN_IN_CASES)('$name → $expected', async (c) => {
      const client = await makeClient(t);
      const user = await makeUser(t.app, { password: PASSWORD });
      const browser = new Browser(t.app);
      expect((await browser.login(user.email, PASSWORD)).statusCode).toBe(303);
      await arrange(t, user, client.app.id, c);
      if (c.expected === null) {
        const { code, verifier } = await authorizeAndGetCode(browser, client, { state: 'st-ok' });
        expect((await exchangeCode(t.app, client, code, verifier)).statusCode).toBe(200);
      } else {
        const res = await browser.get(authorizeUrl(client, { state: 'st-refused' }).url);
        expect(res.statusCode).toBe(302);
        const location = String(res.headers.location);
        expect(location.startsWith(client.app.redirectUris[0]!)).toBe(true);
        const q = new URL(location).searchParams;
        expect(q.get('error')).toBe('access_denied');
        expect(q.get('state')).toBe('st-refused');
        expect(q.get('code')).toBeNull();
      }
    });
  });

  describe('POST /oauth/token: a code issued while allowed, redeemed in the row\'s state', () => {
    it.each(MAY_SIGN_IN_CASES)('$name → $expected', async (c) => {
      const client = await makeClient(t);
      const user = await makeUser(t.app, { password: PASSWORD });
      const browser = new Browser(t.app);
      expect((await browser.login(user.email, PASSWORD)).statusCode).toBe(303);
      const { code, verifier } = await authorizeAndGetCode(browser, client);
      await arrange(t, user, client.app.id, c);
      const res = await exchangeCode(t.app, client, code, verifier);
      if (c.expected === null) {
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().access_token).toBeTruthy();
      } else {
        expectOAuthError(res, 400, 'invalid_grant');
      }
    });
  });
});

// ---------------------------------------------------------------------------------------------------

describe('PKCE challenge syntax at /oauth/authorize', () => {
  let t: TestApp;
  let pub: TestClient;
  let conf: TestClient;

  beforeAll(async () => {
    t = await buildTestApp({ env: ENV });
    pub = await makeClient(t);
    conf = await makeClient(t, { type: 'confidential' });
  });
  afterAll(async () => t.close());

  const valid = pkcePair().challenge;
  const BAD: Array<[string, string]> = [
    ['64 characters', 'A'.repeat(64)],
    ['a 64-character base64url string', Buffer.alloc(48, 7).toString('base64url')],
    ['42 characters', valid.slice(0, 42)],
    ['44 characters', `${valid}A`],
    ['43 characters with padding', `${valid.slice(0, 42)}=`],
    ['43 characters, base64 not base64url', `${valid.slice(0, 41)}+/`],
  ];

  for (const which of ['public', 'confidential'] as const) {
    it.each(BAD)(`${which} app: a code_challenge of %s → redirect with error=invalid_request`, async (_label, challenge) => {
      expect(challenge.length === 43 && /^[A-Za-z0-9_-]+$/.test(challenge)).toBe(false);
      const client = which === 'public' ? pub : conf;
      const { url } = authorizeUrl(client, { pkce: null, state: 'st-pkce', extra: { code_challenge: challenge, code_challenge_method: 'S256' } });
      const res = await new Browser(t.app).get(url);
      expect(res.statusCode).toBe(302);
      const location = String(res.headers.location);
      expect(location.startsWith(client.app.redirectUris[0]!)).toBe(true);
      const q = new URL(location).searchParams;
      expect(q.get('error')).toBe('invalid_request');
      expect(q.get('state')).toBe('st-pkce');
    });
  }

  it('a 43-character S256 challenge passes on to sign-in; plain is refused', async () => {
    const ok = await new Browser(t.app).get(authorizeUrl(pub, { pkce: { verifier: '', challenge: valid } }).url);
    expect(ok.statusCode).toBe(302);
    expect(relative(String(ok.headers.location))).toMatch(/^\/login/);
    const plain = await new Browser(t.app).get(authorizeUrl(pub, { pkce: null, extra: { code_challenge: valid, code_challenge_method: 'plain' } }).url);
    expect(new URL(String(plain.headers.location)).searchParams.get('error')).toBe('invalid_request');
  });
});

// ---------------------------------------------------------------------------------------------------

const CONTROL_NAMES: Array<[string, string]> = [
  ['CR/LF', 'Ada\r\nLovelace'],
  ['ESC', 'Ada\u001b[31m'],
  ['NUL', 'Ada\u0000Lovelace'],
];

describe('control characters in a name are refused at every door that takes a name', () => {
  let t: TestApp;
  const post = poster(() => t);

  beforeAll(async () => {
    t = await buildTestApp({ env: ENV });
  });
  afterAll(async () => t.close());

  it.each(CONTROL_NAMES)('REST /v1/auth/register: %s → 400 invalid_request, no account', async (_label, name) => {
    const client = await makeApp(t.db);
    const email = uniqueEmail('ctl-reg');
    const res = await post('/v1/auth/register', { email, password: PASSWORD, name, client_id: client.id });
    expectV1Error(res, 400, 'invalid_request');
    expect((res.json().details as Array<{ path: string }>).some((d) => /(^|\.)name$/.test(d.path))).toBe(true);
    expect(await findUserByEmail(t.db, email)).toBeUndefined();
  });

  it.each(CONTROL_NAMES)('REST /v1/auth/profile/complete: %s → 400 at data.name, nothing written, still pending', async (_label, name) => {
    const client = await makeApp(t.db, { requiredFields: ['name'] });
    const email = uniqueEmail('ctl-pc');
    const reg = (await post('/v1/auth/register', { email, password: PASSWORD, client_id: client.id })).json();
    expect(reg.status).toBe('pending');
    const user = (await findUserByEmail(t.db, email))!;
    const res = await post('/v1/auth/profile/complete', { session: reg.session, client_id: client.id, data: { name } });
    expectV1Error(res, 400, 'invalid_request');
    expect(res.json().details).toEqual([expect.objectContaining({ path: 'data.name' })]);
    expect((await findUserById(t.db, user.id))!.name).toBeNull();
    expect(await eventsOf(t, user.id, 'profile.updated')).toHaveLength(0);
    // The pending sign-in still completes with a proper name.
    const ok = await post('/v1/auth/profile/complete', { session: reg.session, client_id: client.id, data: { name: 'Ada Lovelace' } });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { name: 'Ada Lovelace' } });
  });

  it.each(CONTROL_NAMES)('hosted /profile step: %s → 400 page, nothing written, no code', async (_label, name) => {
    const client = await makeClient(t, { requiredFields: ['name'] });
    const user = await makeUser(t.app, { password: PASSWORD });
    const browser = new Browser(t.app);
    expect((await browser.login(user.email, PASSWORD)).statusCode).toBe(303);
    const first = await browser.get(authorizeUrl(client).url);
    expect(relative(String(first.headers.location))).toMatch(/^\/consent/);
    const allowed = await browser.submit('/consent', { action: 'allow' });
    const second = await browser.get(String(allowed.headers.location));
    expect(relative(String(second.headers.location))).toMatch(/^\/profile/);

    const refused = await browser.submit('/profile', { name, action: 'save' });
    expect(refused.statusCode).toBe(400);
    expect(refused.headers['content-type']).toMatch(/text\/html/);
    expect(refused.headers.location).toBeUndefined();
    expect((await findUserById(t.db, user.id))!.name).toBeNull();
    expect(await eventsOf(t, user.id, 'profile.updated')).toHaveLength(0);

    const saved = await browser.submit('/profile', { name: 'Ada Lovelace', action: 'save' });
    expect(saved.statusCode).toBe(303);
    expect((await findUserById(t.db, user.id))!.name).toBe('Ada Lovelace');
    const done = await browser.get(String(saved.headers.location));
    expect(new URL(String(done.headers.location)).searchParams.get('code')).toBeTruthy();
  });

  it.each(CONTROL_NAMES)('/account/profile form: %s → 400 page, nothing written', async (_label, name) => {
    const user = await makeUser(t.app, { password: PASSWORD, name: 'Original Name' });
    const browser = new Browser(t.app);
    expect((await browser.submit('/account', { email: user.email, password: PASSWORD, action: 'login' })).statusCode).toBe(303);
    const page = await browser.get('/account');
    const res = await browser.post('/account/profile', { csrf: csrfOf(page.body), name, action: 'save' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect((await findUserById(t.db, user.id))!.name).toBe('Original Name');
    expect(await eventsOf(t, user.id, 'profile.updated')).toHaveLength(0);
  });
});

// ---------------------------------------------------------------------------------------------------

describe('POST /v1/auth/profile/complete: only the missing fields, only a pending sign-in, only once', () => {
  let t: TestApp;
  const post = poster(() => t);

  beforeAll(async () => {
    t = await buildTestApp({ env: ENV });
  });
  afterAll(async () => t.close());

  async function pending(client: App, extra: Record<string, unknown> = {}) {
    const email = uniqueEmail('pending');
    const reg = await post('/v1/auth/register', { email, password: PASSWORD, client_id: client.id, ...extra });
    expect(reg.statusCode, reg.body).toBe(201);
    expect(reg.json().status).toBe('pending');
    return { session: reg.json().session as string, body: reg.json(), user: (await findUserByEmail(t.db, email))! };
  }

  it('cannot overwrite a name the user already has (not a missing field): 400 at data.name, nothing written', async () => {
    const client = await makeApp(t.db, { requiredFields: ['name', 'phone_number'] });
    const { session, body, user } = await pending(client, { name: 'Ada' });
    expect(body.required_fields).toEqual(['phone_number']);

    const res = await post('/v1/auth/profile/complete', { session, client_id: client.id, data: { name: 'Mallory', phone_number: '+14155550100' } });
    expectV1Error(res, 400, 'invalid_request');
    expect(res.json().details).toEqual([expect.objectContaining({ path: 'data.name' })]);
    const row = (await findUserById(t.db, user.id))!;
    expect(row.name).toBe('Ada');
    expect(row.phone_number).toBeNull();
    expect(await eventsOf(t, user.id, 'profile.updated')).toHaveLength(0);

    // The missing field alone is fine.
    const ok = await post('/v1/auth/profile/complete', { session, client_id: client.id, data: { phone_number: '+14155550100' } });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { name: 'Ada', phone_number: '+14155550100' } });
  });

  it('cannot write a field the app does not require: 400 at data.<field>, nothing written', async () => {
    const client = await makeApp(t.db, { requiredFields: ['phone_number'] });
    const { session, user } = await pending(client);
    for (const data of [{ birthdate: '1990-02-03', phone_number: '+14155550100' }, { name: 'Sneaky', phone_number: '+14155550100' }]) {
      const res = await post('/v1/auth/profile/complete', { session, client_id: client.id, data });
      expectV1Error(res, 400, 'invalid_request');
      const extraField = Object.keys(data).find((k) => k !== 'phone_number')!;
      expect(res.json().details).toEqual([expect.objectContaining({ path: `data.${extraField}` })]);
    }
    expect(await findUserById(t.db, user.id)).toMatchObject({ name: null, phone_number: null, birthdate: null });
    expect(await eventsOf(t, user.id, 'profile.updated')).toHaveLength(0);
  });

  it('stays pending while a required field is missing, records profile.updated, and is single-use', async () => {
    const client = await makeApp(t.db, { requiredFields: ['name', 'phone_number'] });
    const { session, body, user } = await pending(client);
    expect(body).toMatchObject({ next_step: 'profile', required_fields: ['name', 'phone_number'] });

    const step = await post('/v1/auth/profile/complete', { session, client_id: client.id, data: { name: 'Pat' } });
    expect(step.statusCode, step.body).toBe(200);
    expect(step.json()).toMatchObject({ status: 'pending', next_step: 'profile', required_fields: ['phone_number'] });
    expect(step.json().access_token).toBeUndefined();
    expect(step.json().refresh_token).toBeUndefined();
    const nextSession = step.json().session as string;
    expect(nextSession).toBeTruthy();

    // Nothing supplied while something is missing: still pending, no tokens.
    const empty = await post('/v1/auth/profile/complete', { session: nextSession, client_id: client.id });
    expect(empty.statusCode, empty.body).toBe(200);
    expect(empty.json()).toMatchObject({ status: 'pending', required_fields: ['phone_number'] });
    expect(empty.json().refresh_token).toBeUndefined();

    const done = await post('/v1/auth/profile/complete', { session: nextSession, client_id: client.id, data: { phone_number: '+44 20 7946 0958' } });
    expect(done.statusCode, done.body).toBe(200);
    expect(done.json()).toMatchObject({ status: 'ok', user: { name: 'Pat', phone_number: '+442079460958' } });
    expect(done.json().refresh_token).toMatch(/^rt_/);

    // Single use: neither session of this sign-in completes it again, with or without data.
    for (const s of [session, nextSession]) {
      expectV1Error(await post('/v1/auth/profile/complete', { session: s, client_id: client.id }), 400, 'invalid_token');
      expectV1Error(await post('/v1/auth/profile/complete', { session: s, client_id: client.id, data: { name: 'Changed' } }), 400, 'invalid_token');
    }
    expect((await findUserById(t.db, user.id))!.name).toBe('Pat');

    const events = await eventsOf(t, user.id, 'profile.updated');
    expect(events).toHaveLength(2);
    for (const e of events) expect(e.app_id).toBe(client.id);
    const data = events.map((e) => JSON.parse(e.data) as { fields: string[]; via: string });
    expect(data.map((d) => d.fields).sort()).toEqual([['name'], ['phone_number']]);
    for (const d of data) expect(d.via).toBe('profile_complete');
    // One completed sign-in: one login event, one refresh token family.
    expect(await eventsOf(t, user.id, 'user.login_succeeded')).toHaveLength(1);
  });

  it('two concurrent completions: exactly one gets tokens', async () => {
    const client = await makeApp(t.db, { requiredFields: ['phone_number'] });
    const { session } = await pending(client);
    const answers = await Promise.all([
      post('/v1/auth/profile/complete', { session, client_id: client.id, data: { phone_number: '+14155550100' } }),
      post('/v1/auth/profile/complete', { session, client_id: client.id, data: { phone_number: '+14155550100' } }),
    ]);
    const ok = answers.filter((r) => r.statusCode === 200 && r.json().status === 'ok');
    expect(ok).toHaveLength(1);
    const other = answers.find((r) => r !== ok[0])!;
    expectV1Error(other, 400, 'invalid_token');
  });

  it('refuses a session JWT that is not a pending REST sign-in of this app', async () => {
    const client = await makeApp(t.db, { requiredFields: ['phone_number'] });
    const other = await makeApp(t.db, { requiredFields: ['phone_number'] });
    const { session, user } = await pending(client);

    // Another app's client_id.
    expectV1Error(await post('/v1/auth/profile/complete', { session, client_id: other.id, data: { phone_number: '+14155550100' } }), 400, 'invalid_token');

    // A session on a grant that was never pending (a completed sign-in's grant).
    const plain = await makeApp(t.db);
    const login = await post('/v1/auth/login', { email: user.email, password: PASSWORD, client_id: plain.id });
    expect(login.json().status).toBe('ok');
    const grant = await t.db.selectFrom('grants').select('id').where('app_id', '=', plain.id).where('user_id', '=', user.id).executeTakeFirstOrThrow();
    const notPending = await t.app.tokens.mintSession({ userId: user.id, appId: plain.id, grantId: grant.id });
    expectV1Error(await post('/v1/auth/profile/complete', { session: notPending, client_id: plain.id }), 400, 'invalid_token');
    expectV1Error(await post('/v1/auth/profile/complete', { session: notPending, client_id: plain.id, data: { name: 'Nope' } }), 400, 'invalid_token');
    expect((await findUserById(t.db, user.id))!.name).toBeNull();

    // The genuine pending sign-in is unaffected.
    const ok = await post('/v1/auth/profile/complete', { session, client_id: client.id, data: { phone_number: '+14155550100' } });
    expect(ok.json().status).toBe('ok');
  });
});

// ---------------------------------------------------------------------------------------------------

describe('authorization codes re-check their basis at redemption', () => {
  let t: TestApp;
  const post = poster(() => t);

  beforeAll(async () => {
    t = await buildTestApp({ env: ENV });
  });
  afterAll(async () => t.close());

  /** A fresh user signed in on the account page (the same browser then drives /oauth/authorize). */
  async function signedIn() {
    const user = await makeUser(t.app, { password: PASSWORD });
    const browser = new Browser(t.app);
    expect((await browser.submit('/account', { email: user.email, password: PASSWORD, action: 'login' })).statusCode).toBe(303);
    return { user, browser };
  }

  async function accountForm(browser: Browser, url: string, form: Record<string, string>) {
    const page = await browser.get('/account');
    return browser.post(url, { csrf: csrfOf(page.body), ...form });
  }

  it('a code issued before the user revokes the app on /account → invalid_grant; another app\'s code still redeems', async () => {
    const client = await makeClient(t);
    const bystander = await makeClient(t);
    const { user, browser } = await signedIn();
    const issued = await authorizeAndGetCode(browser, client);
    const kept = await authorizeAndGetCode(browser, bystander);

    const revoke = await accountForm(browser, '/account/apps', { action: 'deny', client_id: client.app.id });
    expect(revoke.statusCode).toBe(303);
    expect(await eventsOf(t, user.id, 'consent.revoked')).toHaveLength(1);

    expectOAuthError(await exchangeCode(t.app, client, issued.code, issued.verifier), 400, 'invalid_grant');
    const ok = await exchangeCode(t.app, bystander, kept.code, kept.verifier);
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('a code issued before the password is changed on /account/password → invalid_grant; one issued after redeems', async () => {
    const client = await makeClient(t);
    const { browser } = await signedIn();
    const before = await authorizeAndGetCode(browser, client);
    t.clock.advance(2);
    const change = await accountForm(browser, '/account/password', { password: PASSWORD, new_password: 'a brand new passphrase 2048', action: 'save' });
    expect(change.statusCode, change.body.slice(0, 300)).toBe(303);

    expectOAuthError(await exchangeCode(t.app, client, before.code, before.verifier), 400, 'invalid_grant');
    // Issued in the same second as the change: not "before" it.
    const after = await authorizeAndGetCode(browser, client);
    const ok = await exchangeCode(t.app, client, after.code, after.verifier);
    expect(ok.statusCode, ok.body).toBe(200);
  });

  it('a code issued before a password reset (/v1/auth/password/forgot → reset) → invalid_grant', async () => {
    const client = await makeClient(t);
    const { user, browser } = await signedIn();
    const before = await authorizeAndGetCode(browser, client);
    expect((await post('/v1/auth/password/forgot', { email: user.email, client_id: client.app.id })).statusCode).toBe(202);
    const resetToken = await tokenFromMail(t, user.email, 'pr');
    t.clock.advance(2);
    const reset = await post('/v1/auth/password/reset', { reset_token: resetToken, password: 'another brand new passphrase' });
    expect(reset.statusCode, reset.body).toBe(204);
    expectOAuthError(await exchangeCode(t.app, client, before.code, before.verifier), 400, 'invalid_grant');
  });

  it('the basis is checked at redemption itself, not only by expiring codes: consent withdrawn behind the code\'s back → invalid_grant', async () => {
    const client = await makeClient(t);
    const { user, browser } = await signedIn();
    const issued = await authorizeAndGetCode(browser, client);
    expect(await revokeConsent(t.db, client.app.id, user.id)).toBe(true);
    expectOAuthError(await exchangeCode(t.app, client, issued.code, issued.verifier), 400, 'invalid_grant');
  });

  describe('CODE_BASIS_CASES, arranged in the database after the code is issued', () => {
    it.each(CODE_BASIS_CASES)('$name → $expected', async (c) => {
      const client = await makeClient(t);
      const { user, browser } = await signedIn();
      const issued = await authorizeAndGetCode(browser, client, { scope: c.scope });
      const code = await t.db.selectFrom('authorization_codes').select(['created_at', 'scope']).where('code_hash', '=', hashSecret(issued.code)).executeTakeFirstOrThrow();

      if (c.consentedScope === '') await revokeConsent(t.db, client.app.id, user.id);
      else await t.db.updateTable('consents').set({ scope: c.consentedScope }).where('app_id', '=', client.app.id).where('user_id', '=', user.id).execute();
      await updateUser(t.db, user.id, { password_changed_at: c.passwordChangedOffset === null ? null : code.created_at + c.passwordChangedOffset });
      await arrange(t, user, client.app.id, c);

      const res = await exchangeCode(t.app, client, issued.code, issued.verifier);
      if (c.expected === null) {
        expect(res.statusCode, res.body).toBe(200);
        expect(res.json().access_token).toBeTruthy();
      } else {
        expectOAuthError(res, 400, 'invalid_grant');
      }
    });
  });
});
