import type { ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import SQLite from 'better-sqlite3';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { newId } from '../../src/shared/ids.js';
import { DEFAULT_SCOPE } from '../../src/shared/scopes.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { recordAppSignIn, setAppUserStatus } from '../../src/storage/repos/app-users.js';
import { grantConsent } from '../../src/storage/repos/consents.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { findUserById, type UserRow } from '../../src/storage/repos/users.js';
import { buildTestApp, TEST_DIALECT, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { insertTestUser, makeApp } from '../helpers/factories.js';
import { Browser, csrfOf, relative, tokenRequest } from '../helpers/oauth-flows.js';
import { freshDatabaseUrl, startServer } from '../helpers/processes.js';
import { MAY_SIGN_IN_CASES } from './policy-cases.js';

import { type ScriptedProvider, startScriptedProvider } from '../helpers/scripted-provider.js';

/**
 * The provider sign-in doors (`/oauth/idp/start|exchange|resume`, the hosted `/continue` page) held to
 * the one sign-in module: one PKCE rule, one profile-data rule, completion only of what a door opened,
 * database failures reported as such, id_token single use only for tokens the app presents, and the
 * may-sign-in table.
 *
 * The external provider is the scripted one of test/helpers/scripted-provider.ts.
 */

const REDIRECT = 'com.example.app://cb';
const CLIENT_ID = 'gatehouse-client';
const CLIENT_SECRET = `secret-${randomBytes(12).toString('hex')}`;

// Shared fixture ------------------------------------------------------------------------------------------

const pkce = () => {
  const verifier = randomBytes(32).toString('base64url');
  return { verifier, challenge: createHash('sha256').update(verifier).digest('base64url') };
};

/** 64 characters of the base64url alphabet: well-formed characters, but no S256 challenge (always 43). */
const longChallenge = () => randomBytes(48).toString('base64url');

let p: ScriptedProvider;
let t: TestApp;

beforeAll(async () => {
  p = await startScriptedProvider({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
  t = await buildTestApp({
    env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: CLIENT_ID, IDP_CLIENT_SECRET: CLIENT_SECRET, IDP_NAME: 'ScriptedIdP', IP_AUTH_PER_MINUTE: '100000' },
  });
});
afterAll(async () => {
  await t?.close();
  await p?.close();
});

/** id_token claims for `sub` on the app's clock, unique per call (jti) unless the test reuses the token. */
const claims = (sub: string, extra: Record<string, unknown> = {}) => {
  const now = t.clock.now();
  return { iss: p.issuer, sub, aud: CLIENT_ID, iat: now, exp: now + 300, jti: randomBytes(8).toString('hex'), ...extra };
};
const idToken = (sub: string) => p.sign(claims(sub));

const exchange = (clientId: string, body: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: clientId, redirect_uri: REDIRECT, ...body } });
const resume = (clientId: string, body: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url: '/oauth/idp/resume', payload: { client_id: clientId, redirect_uri: REDIRECT, ...body } });

/** A user (no name, no password) bound to the provider subject `sub`. */
async function boundUser(sub: string, overrides: Partial<UserRow> = {}): Promise<UserRow> {
  const user = await insertTestUser(t.db, { email: `${sub}-${randomBytes(4).toString('hex')}@example.com`, ...overrides }, t.clock.now());
  await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: sub, email: null, createdAt: t.clock.now() });
  return user;
}

const uniqueSub = (prefix: string) => `${prefix}-${randomBytes(5).toString('hex')}`;

const redeem = (clientId: string, code: string, verifier: string) =>
  tokenRequest(t.app, { grant_type: 'authorization_code', code, redirect_uri: REDIRECT, client_id: clientId, code_verifier: verifier });

const eventsOf = async (userId: string, type: string) =>
  (await t.db.selectFrom('events').select(['type', 'data']).where('user_id', '=', userId).where('type', '=', type).execute()).map((e) => JSON.parse(e.data) as Record<string, unknown>);

// 1. PKCE -------------------------------------------------------------------------------------------------

describe('one PKCE rule at the provider doors', () => {
  let clientId: string;
  beforeAll(async () => {
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });

  async function consentedUser(prefix: string) {
    const sub = uniqueSub(prefix);
    const user = await boundUser(sub);
    await grantConsent(t.db, clientId, user.id, DEFAULT_SCOPE, t.clock.now());
    return { sub, user };
  }

  it('/oauth/idp/exchange: a 64-character S256 challenge is 400 invalid_request and issues no code; 43 characters work', async () => {
    const { sub, user } = await consentedUser('pkce-ex');
    const token = await idToken(sub);
    const bad = await exchange(clientId, { id_token: token, response_mode: 'code', code_challenge: longChallenge(), code_challenge_method: 'S256', state: 's1' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_request' });
    expect(await countAll(t.db, 'authorization_codes', { user_id: user.id })).toBe(0);

    // The refused request used nothing up: the same id_token with a real S256 challenge signs in.
    const { verifier, challenge } = pkce();
    expect(challenge).toHaveLength(43);
    const ok = await exchange(clientId, { id_token: token, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 's1' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', response_mode: 'code', state: 's1' });
    const redeemed = await redeem(clientId, ok.json().code, verifier);
    expect(redeemed.statusCode).toBe(200);
    expect(redeemed.json().access_token).toBeTypeOf('string');
    // A code issued with no browser session behind it is a session of its own on either database:
    // its ID token carries a sid (docs/guides/back-channel-logout.md).
    const { sid } = decodeJwt(redeemed.json().id_token);
    expect(sid).toMatch(/^sid_/);
    expect(await t.db.selectFrom('grants').select('sid').where('user_id', '=', user.id).execute()).toEqual([{ sid }]);
  });

  it('/oauth/idp/resume: a 64-character S256 challenge is 400 invalid_request; 43 characters give a code that redeems', async () => {
    const { sub } = await consentedUser('pkce-re');
    const signedIn = await exchange(clientId, { id_token: await idToken(sub) });
    expect(signedIn.statusCode).toBe(200);
    const session: string = signedIn.json().session;

    const bad = await resume(clientId, { session, response_mode: 'code', code_challenge: longChallenge(), code_challenge_method: 'S256' });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_request' });

    const { verifier, challenge } = pkce();
    const ok = await resume(clientId, { session, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 's2' });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', response_mode: 'code', state: 's2' });
    expect((await redeem(clientId, ok.json().code, verifier)).statusCode).toBe(200);
  });

  it('/oauth/idp/start: a 64-character S256 challenge redirects back to the app with error=invalid_request', async () => {
    const q = (challenge: string) =>
      new URLSearchParams({ client_id: clientId, redirect_uri: REDIRECT, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 'st-64' }).toString();
    const bad = await t.app.inject(`/oauth/idp/start?${q(longChallenge())}`);
    expect(bad.statusCode).toBe(302);
    const loc = new URL(String(bad.headers.location));
    expect(`${loc.protocol}//${loc.host}${loc.pathname}`).toBe(REDIRECT);
    expect(loc.searchParams.get('error')).toBe('invalid_request');
    expect(loc.searchParams.get('state')).toBe('st-64');
    expect(loc.searchParams.get('code')).toBeNull();

    // A well-formed challenge goes on to the provider.
    const ok = await t.app.inject(`/oauth/idp/start?${q(pkce().challenge)}`);
    expect(ok.statusCode).toBe(302);
    expect(new URL(String(ok.headers.location)).origin).toBe(p.issuer);
  });
});

// 2. Control characters at /continue ----------------------------------------------------------------------

describe('/continue refuses a name with control characters, and the ticket stays usable', () => {
  let clientId: string;
  const BAD_NAMES = ['Eve\r\nX', 'Eve\u001b[31mX', 'Eve\u0000X'];

  beforeAll(async () => {
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT], requiredFields: ['name'], name: 'Needs Names' })).id;
  });

  async function pendingFor(sub: string) {
    const { verifier, challenge } = pkce();
    const params = { response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 'st-c' };
    const ex = await exchange(clientId, { ...params, id_token: await idToken(sub) });
    expect(ex.statusCode).toBe(200);
    return { pending: ex.json(), params, verifier };
  }

  async function refuseBadNames(b: Browser, hosted: string, user: UserRow, action: string) {
    let page = await b.get(hosted);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('name="name"');
    for (const name of BAD_NAMES) {
      const res = await b.post(hosted, { csrf: csrfOf(page.body), action, name });
      expect(res.statusCode, JSON.stringify(name)).toBe(400);
      expect(res.headers['content-type'], JSON.stringify(name)).toMatch(/^text\/html/);
      expect(res.headers.location).toBeUndefined();
      expect((await findUserById(t.db, user.id))!.name, JSON.stringify(name)).toBeNull();
      page = res;
    }
    expect(await eventsOf(user.id, 'profile.updated')).toEqual([]);
    return page;
  }

  it('profile step (consent given): refused names store nothing; a valid name then continues to /oauth/authorize', async () => {
    const sub = uniqueSub('ctl-profile');
    const user = await boundUser(sub);
    await grantConsent(t.db, clientId, user.id, DEFAULT_SCOPE, t.clock.now());
    const { pending, params, verifier } = await pendingFor(sub);
    expect(pending).toMatchObject({ status: 'pending', next_step: 'profile' });
    expect(pending.hosted_url).toMatch(/^http:\/\/localhost:3000\/continue\?ticket=tk_/);
    const hosted = relative(pending.hosted_url);

    const b = new Browser(t.app);
    const last = await refuseBadNames(b, hosted, user, 'continue');

    const done = await b.post(hosted, { csrf: csrfOf(last.body), action: 'continue', name: 'Eve Example' });
    expect(done.statusCode).toBe(303);
    const next = new URL(String(done.headers.location));
    expect(`${next.origin}${next.pathname}`).toBe('http://localhost:3000/oauth/authorize');
    expect(next.searchParams.get('consent')).toBe('1');
    expect(next.searchParams.get('client_id')).toBe(clientId);
    expect(next.searchParams.get('redirect_uri')).toBe(REDIRECT);
    expect((await findUserById(t.db, user.id))!.name).toBe('Eve Example');
    expect(await eventsOf(user.id, 'profile.updated')).toEqual([expect.objectContaining({ fields: ['name'], via: 'continue' })]);

    const resumed = await resume(clientId, { ...params, session: pending.session, consent: '1' });
    expect(resumed.statusCode).toBe(200);
    expect(resumed.json()).toMatchObject({ status: 'ok', response_mode: 'code', state: 'st-c' });
    expect((await redeem(clientId, resumed.json().code, verifier)).statusCode).toBe(200);
  });

  it('consent step: refused names store neither the name nor consent; a valid name with Allow records both', async () => {
    const sub = uniqueSub('ctl-consent');
    const user = await boundUser(sub);
    const { pending } = await pendingFor(sub);
    expect(pending).toMatchObject({ status: 'pending', next_step: 'consent' });
    const hosted = relative(pending.hosted_url);

    const b = new Browser(t.app);
    const last = await refuseBadNames(b, hosted, user, 'allow');
    expect(await countAll(t.db, 'consents', { app_id: clientId, user_id: user.id })).toBe(0);
    expect(await eventsOf(user.id, 'consent.granted')).toEqual([]);

    const done = await b.post(hosted, { csrf: csrfOf(last.body), action: 'allow', name: 'Eve Consenting' });
    expect(done.statusCode).toBe(303);
    const next = new URL(String(done.headers.location));
    expect(next.pathname).toBe('/oauth/authorize');
    expect(next.searchParams.get('consent')).toBe('1');
    expect((await findUserById(t.db, user.id))!.name).toBe('Eve Consenting');
    expect(await countAll(t.db, 'consents', { app_id: clientId, user_id: user.id })).toBe(1);
    expect(await eventsOf(user.id, 'profile.updated')).toEqual([expect.objectContaining({ fields: ['name'], via: 'continue' })]);
    expect(await eventsOf(user.id, 'consent.granted')).toEqual([expect.objectContaining({ via: 'continue' })]);
  });
});

// 3. /v1/auth/profile/complete with a provider session ------------------------------------------------------

describe('/v1/auth/profile/complete does not complete a provider session', () => {
  it('a response_mode=session (or pending) provider session → 400 invalid_token: no tokens, no consent, no name', async () => {
    const app = await makeApp(t.db, { redirectUris: [REDIRECT], requiredFields: ['name'] });
    const sub = uniqueSub('complete');
    const user = await boundUser(sub);

    // A code-mode exchange waiting for consent …
    const { challenge } = pkce();
    const codeParams = { response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256' };
    const pending = await exchange(app.id, { ...codeParams, id_token: await idToken(sub) });
    expect(pending.json()).toMatchObject({ status: 'pending', next_step: 'consent' });
    // … and a session-mode exchange of the same user.
    const signedIn = await exchange(app.id, { id_token: await idToken(sub) });
    expect(signedIn.json()).toMatchObject({ status: 'ok', response_mode: 'session' });

    for (const session of [signedIn.json().session as string, pending.json().session as string]) {
      const res = await t.app.inject({ method: 'POST', url: '/v1/auth/profile/complete', payload: { session, client_id: app.id, data: { name: 'Mallory' } } });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_token' });
      expect(res.json().access_token).toBeUndefined();
      expect(res.json().refresh_token).toBeUndefined();
    }
    expect(await countAll(t.db, 'consents', { app_id: app.id, user_id: user.id })).toBe(0);
    expect(await eventsOf(user.id, 'consent.granted')).toEqual([]);
    expect(await countAll(t.db, 'refresh_tokens', { app_id: app.id })).toBe(0);
    expect((await findUserById(t.db, user.id))!.name).toBeNull();

    // The code-mode sign-in still waits for the user's own consent.
    const resumed = await resume(app.id, { ...codeParams, session: pending.json().session, consent: '1' });
    expect(resumed.statusCode).toBe(200);
    expect(resumed.json()).toMatchObject({ status: 'pending', next_step: 'consent' });
  });
});

// 5. id_token single use vs. tokens Gatehouse fetched itself ---------------------------------------------------

describe('idp_code sign-ins answered with an identical id_token', () => {
  let clientId: string;
  beforeAll(async () => {
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });

  const byCode = (code: string) => {
    const { verifier } = pkce();
    return exchange(clientId, { idp_code: code, idp_redirect_uri: 'com.example.app://idp-cb', idp_code_verifier: verifier });
  };

  it('two codes, one id_token (two sign-ins within one second, no nonce): both sign in; the app may not present that token', async () => {
    const sub = uniqueSub('twin');
    const user = await boundUser(sub);
    const shared = await p.sign(claims(sub, { jti: undefined }));
    const [c1, c2] = [`code-${randomBytes(6).toString('hex')}`, `code-${randomBytes(6).toString('hex')}`];
    p.codes.set(c1, shared);
    p.codes.set(c2, shared);

    const first = await byCode(c1);
    expect(first.statusCode).toBe(200);
    expect(first.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    const second = await byCode(c2);
    expect(second.statusCode, second.body).toBe(200);
    expect(second.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    const [s1, s2] = await Promise.all([t.app.tokens.verifySession(first.json().session, clientId), t.app.tokens.verifySession(second.json().session, clientId)]);
    expect(s1.sub).toBe(user.id);
    expect(s2.sub).toBe(user.id);
    expect(s1.grantId).not.toBe(s2.grantId);

    // The id_token Gatehouse fetched itself is never accepted from the app.
    const presented = await exchange(clientId, { id_token: shared });
    expect(presented.statusCode).toBe(401);
    expect(presented.json()).toMatchObject({ code: 'invalid_id_token' });
    expect(presented.json().session).toBeUndefined();

    // A used code is the provider's to refuse.
    const reused = await byCode(c1);
    expect(reused.statusCode).toBe(401);
    expect(reused.json()).toMatchObject({ code: 'invalid_idp_code' });
  });

  it('an id_token the app presents is single use', async () => {
    const sub = uniqueSub('once');
    await boundUser(sub);
    const token = await idToken(sub);
    const first = await exchange(clientId, { id_token: token });
    expect(first.statusCode).toBe(200);
    const again = await exchange(clientId, { id_token: token });
    expect(again.statusCode).toBe(401);
    expect(again.json()).toMatchObject({ code: 'invalid_id_token' });
    expect(again.json().session).toBeUndefined();
  });
});

// 6. The may-sign-in table at the native door -------------------------------------------------------------------

describe('MAY_SIGN_IN_CASES through /oauth/idp/exchange (response_mode=session)', () => {
  let app: Awaited<ReturnType<typeof makeApp>>;
  beforeAll(async () => {
    app = await makeApp(t.db, { redirectUris: [REDIRECT] });
  });

  it.each(MAY_SIGN_IN_CASES)('$name', async ({ userStatus, membership, expected }) => {
    const sub = uniqueSub('policy');
    const user = await boundUser(sub, { status: userStatus });
    if (membership !== 'none') {
      await recordAppSignIn(t.db, app.id, user.id, t.clock.now());
      if (membership === 'blocked') expect(await setAppUserStatus(t.db, app.id, user.id, 'blocked')).toBe(true);
    }
    const grantsBefore = await countAll(t.db, 'grants', { user_id: user.id });
    const res = await exchange(app.id, { id_token: await idToken(sub), response_mode: 'session' });
    if (expected === null) {
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
      expect((await t.app.tokens.verifySession(res.json().session, app.id)).sub).toBe(user.id);
    } else {
      expect(res.statusCode).toBe(403);
      expect(res.json()).toMatchObject({ code: expected });
      expect(res.json().session).toBeUndefined();
      expect(await countAll(t.db, 'grants', { user_id: user.id })).toBe(grantsBefore);
    }
  });
});

// 4. Database outage during the exchange ------------------------------------------------------------------------

/**
 * A real server process (`tsx src/server.ts`) on its own database, so a lost database connection hits
 * Gatehouse exactly as in production. The outage starts after the id_token is verified: the exchange's
 * first write (remembering the id_token, inside its transaction) cannot get through.
 * - SQLite: another connection holds the write lock past busy_timeout (SQLITE_BUSY);
 * - PostgreSQL: another session locks `one_time_tokens`, and the exchange's backend, waiting on that lock
 *   inside its transaction, is terminated (57P01, the connection drops), as in a database restart.
 */
describe('a database outage during the exchange', { timeout: 120_000 }, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  let storage: Storage;
  let port: number;
  let server: Awaited<ReturnType<typeof startServer>>;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    database = await freshDatabaseUrl();
    server = await startServer(database, { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: CLIENT_ID, IDP_CLIENT_SECRET: CLIENT_SECRET, IP_AUTH_PER_MINUTE: '100000' });
    port = server.port;
    children.push(server.child);
    storage = createStorage(database.url);
  });
  afterAll(async () => {
    for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await server?.done;
    await storage?.close();
    await database?.drop();
  });
  const post = (body: Record<string, unknown>) =>
    fetch(`http://127.0.0.1:${port}/oauth/idp/exchange`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  /** Runs `request` while the database refuses the exchange's write; resolves with its answer (or the network error). */
  async function duringOutage(request: () => Promise<Response>): Promise<Response | Error> {
    if (TEST_DIALECT === 'sqlite') {
      const lock = new SQLite(database.url.slice('sqlite:'.length));
      try {
        lock.exec('BEGIN IMMEDIATE');
        return await request().catch((error: Error) => error);
      } finally {
        lock.exec('ROLLBACK');
        lock.close();
      }
    }
    const dbName = new URL(database.url).pathname.slice(1);
    const locker = new pg.Client({ connectionString: database.url });
    const admin = new pg.Client({ connectionString: database.url });
    await locker.connect();
    await admin.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('LOCK TABLE one_time_tokens IN ACCESS EXCLUSIVE MODE');
      const answer = request().catch((error: Error) => error);
      let pid: number | undefined;
      for (let i = 0; i < 500 && pid === undefined; i++) {
        const rows = await admin.query<{ pid: number }>(
          `SELECT pid FROM pg_stat_activity WHERE datname = $1 AND wait_event_type = 'Lock' AND query LIKE 'insert into "one_time_tokens"%'`,
          [dbName],
        );
        pid = rows.rows[0]?.pid;
        if (pid === undefined) await new Promise((resolve) => setTimeout(resolve, 20));
      }
      expect(pid, 'the exchange never reached its write').toBeDefined();
      await admin.query('SELECT pg_terminate_backend($1)', [pid]);
      await locker.query('ROLLBACK');
      return await answer;
    } finally {
      await locker.end().catch(() => undefined);
      await admin.end().catch(() => undefined);
    }
  }

  it('answers 503 service_unavailable with Retry-After (not 401 invalid_id_token); the id_token is not used up', async () => {
    const app = await makeApp(storage.db, { redirectUris: [REDIRECT] });
    const sub = uniqueSub('outage');
    const user = await insertTestUser(storage.db, { email: `${sub}@example.com` });
    await insertIdentity(storage.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: sub, email: null, createdAt: user.created_at });
    const now = Math.floor(Date.now() / 1000);
    const token = await p.sign({ iss: p.issuer, sub, aud: CLIENT_ID, iat: now, exp: now + 300, jti: randomBytes(8).toString('hex') });
    const body = { client_id: app.id, redirect_uri: REDIRECT, id_token: token };

    const res = await duringOutage(() => post(body));
    const alive = server.child.exitCode === null && server.child.signalCode === null;
    expect(alive, `the server process died: ${server.output().stderr.slice(-2000)}`).toBe(true);
    expect(res).toBeInstanceOf(Response);
    const answer = res as Response;
    const json = (await answer.json()) as Record<string, unknown>;
    expect(answer.status, JSON.stringify(json)).not.toBe(401);
    expect(answer.status, JSON.stringify(json)).toBe(503);
    expect(json).toMatchObject({ code: 'service_unavailable' });
    expect(json.session).toBeUndefined();
    expect(answer.headers.get('retry-after')).toMatch(/^\d+$/);

    // Once the database answers again, the client's retry with the same id_token signs in.
    const retry = await post(body);
    expect(retry.status).toBe(200);
    expect(await retry.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
  });
});
