import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createHash, randomBytes } from 'node:crypto';
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { FAILURE_BACKOFF_S } from '../../src/idp/provider.js';
import { newId } from '../../src/shared/ids.js';
import { DEFAULT_SCOPE } from '../../src/shared/scopes.js';
import { grantConsent } from '../../src/storage/repos/consents.js';
import { findIdentity, insertIdentity, listIdentitiesOfUser } from '../../src/storage/repos/idp.js';
import { findUserById } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { Browser, csrfOf, relative } from '../helpers/oauth-flows.js';
import { startProvider, type TestProvider } from '../helpers/oidc-provider.js';

/**
 * Provider failure modes (docs/security/checklist.md#the-external-provider, docs/reference/errors.md `idp_unavailable`), key selection without
 * `kid`, ignored `jku`/`x5u`/`jwk` headers, the native `pending` profile step through `/continue`,
 * and the bind-intent callback from the account page (docs/guides/identity-provider.md#start-and-callback, docs/guides/identity-provider.md#native-exchange-and-resume).
 *
 * The "scriptable provider" is a tiny `node:http` server on 127.0.0.1 serving its own discovery
 * document and JWKS (whose behaviour each test sets) and signing tokens with its own keys; a canary
 * server counts every request made to it.
 *
 * The tests move time forward by moving the system clock, which both the app's test clock and jose's
 * JWKS cache read (src/idp/provider.ts).
 */

const REDIRECT = 'com.example.app://cb';
const CLIENT_ID = 'gatehouse-client';

type JwksMode = 'ok' | 'status500' | 'badjson' | 'hang' | 'redirect-canary' | 'redirect-same';

interface Counter {
  url: string;
  hits: number;
  close(): Promise<void>;
}

async function listen(handler: (req: IncomingMessage, res: ServerResponse) => void): Promise<{ server: Server; url: string }> {
  const server = createServer(handler);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

const closeServer = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

async function startCanary(): Promise<Counter> {
  const state = { hits: 0 };
  const { server, url } = await listen((_req, res) => {
    state.hits++;
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys":[]}');
  });
  return {
    url,
    get hits() {
      return state.hits;
    },
    close: () => closeServer(server),
  };
}

async function newKey(): Promise<JWK> {
  const { privateKey } = await generateKeyPair('RS256', { extractable: true });
  return { ...(await exportJWK(privateKey)), kid: `k-${randomBytes(6).toString('hex')}`, alg: 'RS256', use: 'sig' };
}

const publicPart = ({ d, p, q, dp, dq, qi, ...pub }: JWK): JWK => pub;

interface FakeProvider {
  issuer: string;
  mode: JwksMode;
  /** Private keys whose public halves the JWKS publishes. */
  keys: JWK[];
  jwksHits: number;
  discoveryHits: number;
  canary: string;
  sign(claims: Record<string, unknown>, options?: { key?: JWK; header?: Record<string, unknown>; noKid?: boolean }): Promise<string>;
  close(): Promise<void>;
}

async function startFakeProvider(canary: string): Promise<FakeProvider> {
  const hanging: ServerResponse[] = [];
  const fake = {
    issuer: '',
    mode: 'ok' as JwksMode,
    keys: [await newKey()],
    jwksHits: 0,
    discoveryHits: 0,
    canary,
  };
  const { server, url } = await listen((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/.well-known/openid-configuration') {
      fake.discoveryHits++;
      res.writeHead(200, { 'content-type': 'application/json' }).end(
        JSON.stringify({
          issuer: url,
          authorization_endpoint: `${url}/auth`,
          token_endpoint: `${url}/token`,
          jwks_uri: `${url}/jwks`,
          id_token_signing_alg_values_supported: ['RS256'],
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
        }),
      );
      return;
    }
    if (path === '/jwks') {
      fake.jwksHits++;
      const ok = () => res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ keys: fake.keys.map(publicPart) }));
      switch (fake.mode) {
        case 'ok':
          return ok();
        case 'status500':
          return res.writeHead(500, { 'content-type': 'text/plain' }).end('boom');
        case 'badjson':
          return res.writeHead(200, { 'content-type': 'application/json' }).end('{"keys": [ this is not json');
        case 'hang':
          hanging.push(res);
          return undefined;
        case 'redirect-canary':
          return res.writeHead(302, { location: `${fake.canary}/jwks` }).end();
        case 'redirect-same':
          return res.writeHead(302, { location: '/jwks' }).end();
      }
    }
    res.writeHead(404).end();
  });
  fake.issuer = url;
  return Object.assign(fake, {
    async sign(claims: Record<string, unknown>, options: { key?: JWK; header?: Record<string, unknown>; noKid?: boolean } = {}) {
      const jwk = options.key ?? fake.keys[0]!;
      const key = await importJWK(jwk, 'RS256');
      const header = { alg: 'RS256', typ: 'JWT', ...(options.noKid ? {} : { kid: jwk.kid }), ...(options.header ?? {}) };
      return new SignJWT(claims).setProtectedHeader(header as { alg: string }).sign(key);
    },
    async close() {
      for (const res of hanging) res.destroy();
      await closeServer(server);
    },
  });
}

describe('provider failures, key selection and the pending profile step (scriptable provider)', () => {
  let t: TestApp;
  let p: FakeProvider;
  let canary: Counter;
  let clientId: string;

  beforeAll(async () => {
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    canary = await startCanary();
    p = await startFakeProvider(canary.url);
    t = await buildTestApp({ env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: CLIENT_ID, IDP_NAME: 'FakeIdP', IP_AUTH_PER_MINUTE: '100000' } });
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });
  afterAll(async () => {
    vi.useRealTimers();
    await t?.close();
    await p?.close();
    await canary?.close();
  });

  /** Lets `seconds` pass, for the app (its test clock) and for jose's JWKS cache alike. */
  const elapse = (seconds: number) => vi.setSystemTime(Date.now() + seconds * 1000);

  /** id_token claims on the app's clock (the tests move it). */
  const claims = (sub: string, extra: Record<string, unknown> = {}) => {
    const now = t.clock.now();
    return { iss: p.issuer, sub, aud: CLIENT_ID, iat: now, exp: now + 300, jti: randomBytes(8).toString('hex'), ...extra };
  };

  const exchange = (body: Record<string, unknown>, client = clientId) =>
    t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: client, redirect_uri: REDIRECT, ...body } });

  async function bound(sub: string, overrides: Parameters<typeof makeUser>[1] = {}) {
    const user = await makeUser(t.app, overrides);
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: sub, email: null, createdAt: t.clock.now() });
    return user;
  }

  it('JWKS answering 500, invalid JSON, a redirect (elsewhere or not), or nothing at all → 502 idp_unavailable, never a session', async () => {
    await bound('fail-sub');
    for (const mode of ['status500', 'badjson', 'redirect-canary', 'redirect-same', 'hang'] as const) {
      p.mode = mode;
      elapse(FAILURE_BACKOFF_S + 1); // past the previous failure's back-off: this mode is really fetched
      const started = performance.now();
      const res = await exchange({ id_token: await p.sign(claims('fail-sub')) });
      expect(res.statusCode, mode).toBe(502);
      expect(res.json(), mode).toMatchObject({ code: 'idp_unavailable' });
      expect(res.json().session).toBeUndefined();
      expect(res.headers['content-type']).toMatch(/application\/json/);
      if (mode === 'hang') expect(performance.now() - started).toBeLessThan(15_000);
    }
    expect(canary.hits).toBe(0);
    // While the back-off lasts, the failure is answered from memory: no request per exchange.
    const hits = p.jwksHits;
    expect((await exchange({ id_token: await p.sign(claims('fail-sub')) })).statusCode).toBe(502);
    expect(p.jwksHits).toBe(hits);
    // The provider recovers: no restart needed.
    p.mode = 'ok';
    elapse(FAILURE_BACKOFF_S + 1);
    const ok = await exchange({ id_token: await p.sign(claims('fail-sub')) });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    p.mode = 'ok';
  }, 30_000);

  it('cached keys keep working only within the cache TTL; a removed key is rejected once the cache expires', async () => {
    await bound('cache-sub');
    p.mode = 'ok';
    expect((await exchange({ id_token: await p.sign(claims('cache-sub')) })).statusCode).toBe(200);
    const hits = p.jwksHits;
    p.mode = 'status500';
    expect((await exchange({ id_token: await p.sign(claims('cache-sub')) })).statusCode).toBe(200);
    expect(p.jwksHits).toBe(hits);
    // Past the TTL the cache is not used any more: the failing JWKS fails the exchange closed.
    elapse(3601);
    const stale = await exchange({ id_token: await p.sign(claims('cache-sub')) });
    expect(stale.statusCode).toBe(502);
    expect(stale.json().code).toBe('idp_unavailable');
    p.mode = 'ok';
    elapse(FAILURE_BACKOFF_S + 1);
    expect((await exchange({ id_token: await p.sign(claims('cache-sub')) })).statusCode).toBe(200);

    // The provider removes K1 for K2: K1 tokens still verify from the cache, then die at the TTL. K2's
    // unknown kid refetches the JWKS once the last fetch is a minute old.
    const k1 = p.keys[0]!;
    const k2 = await newKey();
    p.keys = [k2];
    expect((await exchange({ id_token: await p.sign(claims('cache-sub'), { key: k1 }) })).statusCode).toBe(200);
    expect((await exchange({ id_token: await p.sign(claims('cache-sub'), { key: k2 }) })).statusCode).toBe(401);
    elapse(61);
    expect((await exchange({ id_token: await p.sign(claims('cache-sub'), { key: k2 }) })).statusCode).toBe(200);
    elapse(3601);
    const old = await exchange({ id_token: await p.sign(claims('cache-sub'), { key: k1 }) });
    expect(old.statusCode).toBe(401);
    expect(old.json().code).toBe('invalid_id_token');
    expect((await exchange({ id_token: await p.sign(claims('cache-sub'), { key: k2 }) })).statusCode).toBe(200);
  });

  it('a token without kid: accepted with one key; with two keys only when one of them verifies it', async () => {
    await bound('nokid-sub');
    p.mode = 'ok';
    const k1 = await newKey();
    p.keys = [k1];
    elapse(3601);
    expect((await exchange({ id_token: await p.sign(claims('nokid-sub'), { noKid: true }) })).statusCode).toBe(200);
    const k2 = await newKey();
    p.keys = [k1, k2];
    elapse(3601);
    expect((await exchange({ id_token: await p.sign(claims('nokid-sub'), { key: k1, noKid: true }) })).statusCode).toBe(200);
    expect((await exchange({ id_token: await p.sign(claims('nokid-sub'), { key: k2, noKid: true }) })).statusCode).toBe(200);
    const stranger = await exchange({ id_token: await p.sign(claims('nokid-sub'), { key: await newKey(), noKid: true }) });
    expect(stranger.statusCode).toBe(401);
    expect(stranger.json().code).toBe('invalid_id_token');
  });

  it('jku, x5u, jwk and x5c headers are never used: the canary gets zero requests, the tokens are rejected', async () => {
    await bound('jku-sub');
    p.mode = 'ok';
    const attacker = await newKey();
    const pub = publicPart(attacker);
    const headers: Array<Record<string, unknown>> = [
      { jku: `${canary.url}/jwks`, kid: attacker.kid },
      { x5u: `${canary.url}/cert.pem`, kid: attacker.kid },
      { jku: `${canary.url}/jwks`, x5u: `${canary.url}/cert.pem` },
      { jwk: pub, kid: attacker.kid },
      { x5c: ['MIIBIjANBgkqhkiG9w0BAQEFAAOCAQ8AMIIBCgKCAQEA'], kid: attacker.kid },
    ];
    for (const header of headers) {
      const res = await exchange({ id_token: await p.sign(claims('jku-sub'), { key: attacker, header }) });
      expect(res.statusCode, JSON.stringify(Object.keys(header))).toBe(401);
      expect(res.json().code).toBe('invalid_id_token');
    }
    // A genuine token carrying a jku is verified with the provider's JWKS only (and the canary stays silent).
    expect((await exchange({ id_token: await p.sign(claims('jku-sub'), { header: { jku: `${canary.url}/jwks` } }) })).statusCode).toBe(200);
    // HS256 "signed" with the provider's public key as the secret is refused.
    const hs = await new SignJWT(claims('jku-sub'))
      .setProtectedHeader({ alg: 'HS256', kid: p.keys[0]!.kid })
      .sign(new TextEncoder().encode(JSON.stringify(publicPart(p.keys[0]!))));
    expect((await exchange({ id_token: hs })).statusCode).toBe(401);
    expect(canary.hits).toBe(0);
  });

  it('1,000 tokens with random unknown kids within a minute: all rejected, at most one forced JWKS refetch', async () => {
    await bound('storm-sub');
    p.mode = 'ok';
    expect((await exchange({ id_token: await p.sign(claims('storm-sub')) })).statusCode).toBe(200);
    const before = p.jwksHits;
    const started = performance.now();
    const tokens = await Promise.all(
      Array.from({ length: 1000 }, () => p.sign(claims('storm-sub'), { header: { kid: `unknown-${randomBytes(8).toString('hex')}` } })),
    );
    const statuses = new Map<number, number>();
    for (let i = 0; i < tokens.length; i += 25) {
      const batch = await Promise.all(tokens.slice(i, i + 25).map((id_token) => exchange({ id_token })));
      for (const res of batch) statuses.set(res.statusCode, (statuses.get(res.statusCode) ?? 0) + 1);
    }
    expect(performance.now() - started).toBeLessThan(60_000);
    expect([...statuses]).toEqual([[401, 1000]]);
    expect(p.jwksHits - before).toBeLessThanOrEqual(1);
    // A minute later one more refetch is allowed, not more.
    elapse(61);
    const after = p.jwksHits;
    for (let i = 0; i < 5; i++) {
      expect((await exchange({ id_token: await p.sign(claims('storm-sub'), { header: { kid: `late-${i}` } }) })).statusCode).toBe(401);
    }
    expect(p.jwksHits - after).toBe(1);
  }, 60_000);

  it('a cold cache under a burst of concurrent tokens fetches discovery and the JWKS a bounded number of times', async () => {
    // A second instance of the service, with empty caches, against the same provider.
    const cold = await buildTestApp({ env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: CLIENT_ID, IP_AUTH_PER_MINUTE: '100000' } });
    try {
      const client = (await makeApp(cold.db, { redirectUris: [REDIRECT] })).id;
      p.mode = 'ok';
      const jwks = p.jwksHits;
      const discovery = p.discoveryHits;
      const tokens = await Promise.all(Array.from({ length: 50 }, (_, i) => p.sign(claims('cold-sub'), { header: { kid: `cold-${i}` } })));
      const answers = await Promise.all(
        tokens.map((id_token) => cold.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: client, redirect_uri: REDIRECT, id_token } })),
      );
      expect(answers.every((r) => r.statusCode === 401)).toBe(true);
      expect(p.discoveryHits - discovery).toBe(1);
      expect(p.jwksHits - jwks).toBeLessThanOrEqual(2);
    } finally {
      await cold.close();
    }
  });

  it('pending next_step profile: /continue asks for the name, then resume answers ok with a code', async () => {
    p.mode = 'ok';
    const app = await makeApp(t.db, { redirectUris: [REDIRECT], requiredFields: ['name'], name: 'Needs Names' });
    const user = await bound('profile-sub');
    expect(user.name).toBeNull();
    await grantConsent(t.db, app.id, user.id, DEFAULT_SCOPE, t.clock.now());
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const params = { client_id: app.id, redirect_uri: REDIRECT, response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256', state: 'st-p' };

    const ex = await t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { ...params, id_token: await p.sign(claims('profile-sub')) } });
    expect(ex.statusCode).toBe(200);
    const pending = ex.json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'profile', authorize_params: { client_id: app.id, redirect_uri: REDIRECT, response_mode: 'code' } });
    expect(pending.hosted_url).toMatch(/^http:\/\/localhost:3000\/continue\?ticket=tk_/);

    // Resume before the step: still pending.
    const early = await t.app.inject({ method: 'POST', url: '/oauth/idp/resume', payload: { ...params, session: pending.session } });
    expect(early.json()).toMatchObject({ status: 'pending', next_step: 'profile' });
    const hosted = relative(early.json().hosted_url);

    const b = new Browser(t.app);
    const page = await b.get(hosted);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('name="name"');
    expect(page.body).not.toContain('name="phone_number"');
    expect(page.body).toContain('Needs Names');
    // An empty name is refused and nothing is recorded; the ticket stays usable.
    const empty = await b.post(hosted, { csrf: csrfOf(page.body), name: '   ', action: 'continue' });
    expect(empty.statusCode).toBe(400);
    expect((await findUserById(t.db, user.id))!.name).toBeNull();
    // Without the CSRF token: 403.
    expect((await b.post(hosted, { name: 'Ada Lovelace', action: 'continue' })).statusCode).toBe(403);

    const done = await b.post(hosted, { csrf: csrfOf(empty.body), name: 'Ada Lovelace', action: 'continue' });
    expect(done.statusCode).toBe(303);
    const next = new URL(String(done.headers.location));
    expect(next.pathname).toBe('/oauth/authorize');
    expect(next.searchParams.get('consent')).toBe('1');
    expect(next.searchParams.get('client_id')).toBe(app.id);
    expect((await findUserById(t.db, user.id))!.name).toBe('Ada Lovelace');
    // The ticket is single use.
    expect((await b.get(hosted)).statusCode).toBe(400);

    const resumed = await t.app.inject({ method: 'POST', url: '/oauth/idp/resume', payload: { ...params, session: pending.session, consent: '1' } });
    expect(resumed.statusCode).toBe(200);
    expect(resumed.json()).toMatchObject({ status: 'ok', response_mode: 'code', state: 'st-p' });
    const token = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ grant_type: 'authorization_code', code: resumed.json().code, redirect_uri: REDIRECT, client_id: app.id, code_verifier: verifier }).toString(),
    });
    expect(token.statusCode).toBe(200);
    expect(token.json().access_token).toBeTypeOf('string');
  });
});

/** A user agent for the real provider's development sign-in: follows redirects with its own cookies. */
async function providerSignIn(start: string, sub: string, stopAt: string): Promise<string> {
  const cookies = new Map<string, string>();
  const remember = (res: Response) => {
    for (const c of res.headers.getSetCookie()) {
      const [pair] = c.split(';');
      const i = pair!.indexOf('=');
      cookies.set(pair!.slice(0, i).trim(), pair!.slice(i + 1));
    }
  };
  const cookieHeader = () => [...cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  let url = start;
  let init: RequestInit = {};
  for (let i = 0; i < 12; i++) {
    if (url.startsWith(stopAt)) return url;
    const res = await fetch(url, { ...init, redirect: 'manual', headers: { ...(init.headers as Record<string, string>), cookie: cookieHeader() } });
    remember(res);
    init = {};
    const location = res.headers.get('location');
    if (res.status >= 300 && res.status < 400 && location) {
      url = new URL(location, url).toString();
      continue;
    }
    const html = await res.text();
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (res.status !== 200 || !action) throw new Error(`provider flow stopped at ${url}: ${res.status} ${html.slice(0, 200)}`);
    const prompt = html.includes('name="login"') ? 'login' : 'consent';
    url = new URL(action.replace(/&amp;/g, '&'), url).toString();
    init = {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams(prompt === 'login' ? { prompt, login: sub, password: 'anything' } : { prompt }).toString(),
    };
  }
  throw new Error('provider flow did not finish');
}

describe('bind intent from the account page (real provider)', () => {
  let t: TestApp;
  let p: TestProvider;
  const callback = 'http://localhost:3000/oauth/idp/callback';

  beforeAll(async () => {
    p = await startProvider({ redirectUris: [callback] });
    t = await buildTestApp({ env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: p.clientId, IDP_CLIENT_SECRET: p.clientSecret, IDP_NAME: 'TestIdP', IP_AUTH_PER_MINUTE: '1000' } });
  });
  afterAll(async () => {
    await t?.close();
    await p?.close();
  });

  async function signedIn() {
    const user = await makeUser(t.app);
    const b = new Browser(t.app);
    expect((await b.submit('/account', { email: user.email, password: user.password, action: 'login' })).statusCode).toBe(303);
    return { b, user };
  }

  /** Account page → bind → provider sign-in as `sub` → our callback, in browser `b`. */
  async function bindAs(b: Browser, sub: string) {
    const page = await b.get('/account');
    expect(page.body).toContain('value="bind"');
    const start = await b.post('/account/idp', { csrf: csrfOf(page.body), action: 'bind' });
    expect(start.statusCode).toBe(303);
    const authorize = new URL(String(start.headers.location));
    expect(authorize.origin).toBe(p.issuer);
    expect(authorize.searchParams.get('redirect_uri')).toBe(callback);
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    const back = await providerSignIn(authorize.toString(), sub, callback);
    return { callbackUrl: back, res: await b.get(back) };
  }

  it('binds the provider subject to the signed-in user (idp.bound); the account page shows it', async () => {
    const { b, user } = await signedIn();
    const { res } = await bindAs(b, 'bind-sub-1');
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('http://localhost:3000/account?bound=1');
    expect((await findIdentity(t.db, p.issuer, 'bind-sub-1'))?.userId).toBe(user.id);
    const events = await t.db.selectFrom('events').select('type').where('user_id', '=', user.id).where('type', '=', 'idp.bound').execute();
    expect(events).toHaveLength(1);
    const page = await b.get('/account?bound=1');
    expect(page.body).toContain('Your provider account is now bound.');
    expect(page.body).toContain('Bound to your TestIdP account');
    // The same browser session is kept (no sign-in happened).
    expect(page.body).toContain(user.email);
  });

  it('a subject already bound to another user: error on the account page, nothing changed', async () => {
    const first = await signedIn();
    await bindAs(first.b, 'bind-sub-2');
    const second = await signedIn();
    const { res } = await bindAs(second.b, 'bind-sub-2');
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('http://localhost:3000/account?idp_error=conflict');
    const page = await second.b.get(relative(String(res.headers.location)));
    expect(page.body).toContain('already bound to another account');
    expect(page.body).toContain(second.user.email);
    expect((await findIdentity(t.db, p.issuer, 'bind-sub-2'))?.userId).toBe(first.user.id);
    expect(await listIdentitiesOfUser(t.db, second.user.id)).toHaveLength(0);
    const events = await t.db.selectFrom('events').select('type').where('user_id', '=', second.user.id).where('type', '=', 'idp.bound').execute();
    expect(events).toHaveLength(0);
  });

  it('the bind callback in another browser binds nothing and does not cancel the real one; a replay binds nothing', async () => {
    const { b, user } = await signedIn();
    const page = await b.get('/account');
    const start = await b.post('/account/idp', { csrf: csrfOf(page.body), action: 'bind' });
    const back = await providerSignIn(String(start.headers.location), 'bind-sub-3', callback);
    // A different browser (no binder cookie, not signed in) cannot complete it.
    const other = await signedIn();
    const foreign = await other.b.get(back);
    expect(foreign.statusCode).toBe(400);
    expect(await findIdentity(t.db, p.issuer, 'bind-sub-3')).toBeUndefined();
    expect((await other.b.get(back)).statusCode).toBe(400);
    expect(await listIdentitiesOfUser(t.db, other.user.id)).toHaveLength(0);
    // The foreign attempts did not use up the transaction: the browser that started it still binds.
    const own = await b.get(back);
    expect(own.statusCode).toBe(303);
    expect((await findIdentity(t.db, p.issuer, 'bind-sub-3'))?.userId).toBe(user.id);
    // A replay of the same callback never binds twice.
    expect((await b.get(back)).statusCode).toBe(400);
    expect(await listIdentitiesOfUser(t.db, user.id)).toHaveLength(1);
  });
});
