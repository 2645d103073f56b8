import { generateKeyPair, generateProof } from 'dpop';
import { exportJWK, generateKeyPair as joseKeyPair, SignJWT } from 'jose';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { authorizeAndGetCode, Browser, exchangeCode, makeClient, refresh, type TestClient } from '../helpers/oauth-flows.js';

/**
 * DPoP at the endpoints (docs/reference/oauth.md "DPoP"), with proofs made by hand (`dpop` package):
 * a jti replayed on another instance sharing the database or Redis, each proof rule as the token
 * endpoint applies it (its method, its URL under BASE_URL, the injected clock), the nonce round trip,
 * `ath` at userinfo, refresh without the key revoking nothing, the per-app requirement, REST sign-in.
 */

const BASE = 'http://localhost:3000';

describe('DPoP at the endpoints', () => {
  let t: TestApp;
  let other: TestApp;
  let client: TestClient;

  beforeAll(async () => {
    t = await buildTestApp({ env: { DPOP_NONCES: '0' } });
    other = await buildTestApp({ env: { DPOP_NONCES: '0' }, storage: t.storage });
    client = await makeClient(t);
  });
  afterAll(async () => {
    await other?.close();
    await t?.close();
  });

  async function codeFor(): Promise<{ code: string; verifier?: string }> {
    const browser = new Browser(t.app);
    await browser.register();
    return authorizeAndGetCode(browser, client);
  }

  it('a proof replayed on another instance is refused (shared jti cache)', async () => {
    const keys = await generateKeyPair('ES256');
    const proof = await generateProof(keys, `${BASE}/oauth/token`, 'POST');
    const first = await codeFor();
    const ok = await exchangeCode(t.app, client, first.code, first.verifier, undefined, {});
    expect(ok.statusCode).toBe(200);
    const second = await codeFor();
    const res1 = await exchangeCode(t.app, client, second.code, second.verifier);
    expect(res1.statusCode).toBe(200);
    const third = await codeFor();
    const withProof = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: proof }, payload: new URLSearchParams({ grant_type: 'authorization_code', code: third.code, redirect_uri: client.app.redirectUris[0]!, client_id: client.app.id, code_verifier: third.verifier! }).toString() });
    expect(withProof.statusCode).toBe(200);
    expect(withProof.json().token_type).toBe('DPoP');
    const fourth = await codeFor();
    const replayed = await other.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: proof }, payload: new URLSearchParams({ grant_type: 'authorization_code', code: fourth.code, redirect_uri: client.app.redirectUris[0]!, client_id: client.app.id, code_verifier: fourth.verifier! }).toString() });
    expect(replayed.statusCode).toBe(400);
    expect(replayed.json().error).toBe('invalid_dpop_proof');
  });

  // Two more databases to make and migrate: a longer timeout.
  it.skipIf(!process.env.TEST_REDIS_URL)('a proof replayed on another instance sharing only Redis is refused (TEST_REDIS_URL)', { timeout: 120_000 }, async () => {
    const env = { DPOP_NONCES: '0', REDIS_URL: process.env.TEST_REDIS_URL! };
    // Separate databases: only the shared Redis can see the replay.
    const a = await buildTestApp({ env });
    const b = await buildTestApp({ env });
    try {
      const proof = await generateProof(await generateKeyPair('ES256'), `${BASE}/oauth/token`, 'POST');
      const send = (x: TestApp) => x.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: proof }, payload: 'grant_type=refresh_token&refresh_token=rt_unknown&client_id=app_unknown' });
      expect((await send(a)).json().error).toBe('invalid_client');
      const replayed = await send(b);
      expect(replayed.statusCode).toBe(400);
      expect(replayed.json().error).toBe('invalid_dpop_proof');
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('the token endpoint applies each proof rule: its method, its URL under BASE_URL, the clock, asymmetric public keys, one header', async () => {
    const keys = await generateKeyPair('ES256');
    const claims = () => ({ jti: randomBytes(12).toString('hex'), htm: 'POST', htu: `${BASE}/oauth/token`, iat: t.clock.now() });
    const hs256 = () => new SignJWT(claims()).setProtectedHeader({ alg: 'HS256', typ: 'dpop+jwt', jwk: { kty: 'oct', k: 'c2VjcmV0' } as never }).sign(new TextEncoder().encode('secret'));
    const privateJwk = async () => {
      const { privateKey } = await joseKeyPair('ES256', { extractable: true });
      return new SignJWT(claims()).setProtectedHeader({ alg: 'ES256', typ: 'dpop+jwt', jwk: await exportJWK(privateKey) }).sign(privateKey);
    };
    const send = (dpop: string | string[], headers: Record<string, string> = {}) =>
      t.app.inject({
        method: 'POST', url: '/oauth/token',
        headers: { 'content-type': 'application/x-www-form-urlencoded', dpop, ...headers },
        payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'rt_unknown', client_id: client.app.id }).toString(),
      });
    const refused: Array<[string, () => Promise<Awaited<ReturnType<typeof send>>>]> = [
      ['htm GET', async () => send(await generateProof(keys, `${BASE}/oauth/token`, 'GET'))],
      ['htu of userinfo', async () => send(await generateProof(keys, `${BASE}/oauth/userinfo`, 'POST'))],
      // The Host header names another server; htu is compared with BASE_URL, never with it.
      ['htu of the Host header', async () => send(await generateProof(keys, 'http://evil.example/oauth/token', 'POST'), { host: 'evil.example' })],
      ['HS256', async () => send(await hs256())],
      ['private key in jwk', async () => send(await privateJwk())],
      ['two DPoP headers', async () => send([await generateProof(keys, `${BASE}/oauth/token`, 'POST'), await generateProof(keys, `${BASE}/oauth/token`, 'POST')])],
      [
        'iat older than 120 s on the injected clock',
        async () => {
          const proof = await generateProof(keys, `${BASE}/oauth/token`, 'POST');
          t.clock.advance(121);
          try {
            return await send(proof);
          } finally {
            t.clock.advance(-121);
          }
        },
      ],
    ];
    for (const [name, run] of refused) {
      const res = await run();
      expect(res.statusCode, name).toBe(400);
      expect(res.json().error, name).toBe('invalid_dpop_proof');
    }
    // Positive control: a good proof gets past the check to the grant itself.
    expect((await send(await generateProof(keys, `${BASE}/oauth/token`, 'POST'))).json().error).toBe('invalid_grant');
  });

  it('userinfo needs the DPoP scheme, a proof by the bound key and ath; a refresh without the key revokes nothing', async () => {
    const keys = await generateKeyPair('ES256');
    const { code, verifier } = await codeFor();
    const res = await exchangeCode(t.app, client, code, verifier, undefined, {});
    expect(res.statusCode).toBe(200);
    const unbound = res.json() as { refresh_token: string };
    // An unbound pair for comparison; now a bound one.
    expect(unbound.refresh_token).toBeTruthy();
    const second = await codeFor();
    const bound = await t.app.inject({
      method: 'POST', url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await generateProof(keys, `${BASE}/oauth/token`, 'POST') },
      payload: new URLSearchParams({ grant_type: 'authorization_code', code: second.code, redirect_uri: client.app.redirectUris[0]!, client_id: client.app.id, code_verifier: second.verifier! }).toString(),
    });
    const tokens = bound.json() as { access_token: string; refresh_token: string };
    const info = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers });
    const noAth = await info({ authorization: `DPoP ${tokens.access_token}`, dpop: await generateProof(keys, `${BASE}/oauth/userinfo`, 'GET') });
    expect(noAth.statusCode).toBe(401);
    expect(noAth.headers['www-authenticate']).toContain('error="invalid_dpop_proof"');
    const otherKey = await info({ authorization: `DPoP ${tokens.access_token}`, dpop: await generateProof(await generateKeyPair('ES256'), `${BASE}/oauth/userinfo`, 'GET', undefined, tokens.access_token) });
    expect(otherKey.statusCode).toBe(401);
    const good = await info({ authorization: `DPoP ${tokens.access_token}`, dpop: await generateProof(keys, `${BASE}/oauth/userinfo`, 'GET', undefined, tokens.access_token) });
    expect(good.statusCode).toBe(200);
    const profile = await t.app.inject({ method: 'GET', url: `/v1/profile/${good.json().sub}`, headers: { authorization: `Bearer ${tokens.access_token}`, 'x-client-id': client.app.id } });
    expect(profile.statusCode).toBe(401);

    // Without the key, then with another: refused, and the family is still live for its owner.
    expect((await refresh(t.app, client, tokens.refresh_token)).json().error).toBe('invalid_dpop_proof');
    const stolen = await refresh(t.app, client, tokens.refresh_token, {});
    expect(stolen.statusCode).toBe(400);
    const withOther = await t.app.inject({
      method: 'POST', url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await generateProof(await generateKeyPair('ES256'), `${BASE}/oauth/token`, 'POST') },
      payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: client.app.id }).toString(),
    });
    expect(withOther.json().error).toBe('invalid_dpop_proof');
    const owner = await t.app.inject({
      method: 'POST', url: '/oauth/token',
      headers: { 'content-type': 'application/x-www-form-urlencoded', dpop: await generateProof(keys, `${BASE}/oauth/token`, 'POST') },
      payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: tokens.refresh_token, client_id: client.app.id }).toString(),
    });
    expect(owner.statusCode).toBe(200);
    expect(owner.json().token_type).toBe('DPoP');
  });

  it('an app with dpop_bound_access_tokens refuses a REST sign-in without a proof, and binds one with it', async () => {
    const strict = await makeClient(t, { oauth: { dpopBoundAccessTokens: true, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: false } });
    const email = `strict.${Date.now()}@example.com`;
    const without = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password: 'correct horse battery staple 42', client_id: strict.app.id } });
    expect(without.statusCode).toBe(400);
    expect(without.json().code).toBe('invalid_dpop_proof');
    const keys = await generateKeyPair('ES256');
    const withProof = await t.app.inject({ method: 'POST', url: '/v1/auth/register', headers: { dpop: await generateProof(keys, `${BASE}/v1/auth/register`, 'POST') }, payload: { email, password: 'correct horse battery staple 42', client_id: strict.app.id } });
    expect(withProof.statusCode, withProof.body).toBe(201);
    expect(withProof.json().token_type).toBe('DPoP');
  });

  it('with nonces on, a proof without one gets use_dpop_nonce and the DPoP-Nonce to use', async () => {
    const n = await buildTestApp({ storage: t.storage });
    try {
      const keys = await generateKeyPair('ES256');
      const payload = new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'rt_unknown', client_id: client.app.id }).toString();
      const ask = (dpop: string) => n.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded', dpop }, payload });
      const first = await ask(await generateProof(keys, `${BASE}/oauth/token`, 'POST'));
      expect(first.json().error).toBe('use_dpop_nonce');
      const nonce = String(first.headers['dpop-nonce']);
      expect(nonce).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const second = await ask(await generateProof(keys, `${BASE}/oauth/token`, 'POST', nonce));
      expect(second.json().error).toBe('invalid_grant');
    } finally {
      await n.app.close();
    }
  });
});
