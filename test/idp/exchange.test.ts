import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { createHash } from 'node:crypto';
import { newId } from '../../src/shared/ids.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { newRsaJwk, startProvider, type TestProvider } from '../helpers/oidc-provider.js';

const REDIRECT = 'com.example.app://cb';

describe('POST /oauth/idp/exchange with id_token (path A)', () => {
  let t: TestApp;
  let p: TestProvider;
  let clientId: string;

  beforeAll(async () => {
    p = await startProvider({ redirectUris: ['http://localhost:3000/oauth/idp/callback'] });
    t = await buildTestApp({ env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: p.clientId, IDP_CLIENT_SECRET: p.clientSecret, IDP_NAME: 'TestIdP', IP_AUTH_PER_MINUTE: '1000' } });
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });
  afterAll(async () => {
    await t.close();
    await p.close();
  });

  const exchange = (body: Record<string, unknown>) =>
    t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: clientId, redirect_uri: REDIRECT, ...body } });

  async function bound(sub: string) {
    const user = await makeUser(t.app);
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: sub, email: null, createdAt: t.clock.now() });
    return user;
  }

  it('rejects tokens signed by a foreign key, for another audience or issuer, or expired', async () => {
    await bound('alice-sub');
    const foreign = await newRsaJwk();
    const cases = [
      await p.sign(p.claims('alice-sub'), { key: { ...foreign, kid: p.signingKey.kid } }),
      await p.sign(p.claims('alice-sub', { aud: 'other-client' })),
      await p.sign(p.claims('alice-sub', { aud: [p.clientId, 'untrusted'] })),
      await p.sign(p.claims('alice-sub', { iss: `${p.issuer}/` })),
      await p.sign(p.claims('alice-sub', { exp: Math.floor(Date.now() / 1000) - 600 })),
      await p.sign(p.claims('alice-sub', { iat: Math.floor(Date.now() / 1000) + 3600 })),
      await p.sign(p.claims('alice-sub', { iat: undefined })),
      (await p.sign(p.claims('alice-sub'))).slice(0, -5),
      `${Buffer.from('{"alg":"none"}').toString('base64url')}.${Buffer.from(JSON.stringify(p.claims('alice-sub'))).toString('base64url')}.`,
    ];
    for (const id_token of cases) {
      const res = await exchange({ id_token });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: 'invalid_id_token' });
    }
  });

  it('answers 403 idp_oauth_not_bound with the bind entry for an unbound subject, never linking by email', async () => {
    const existing = await makeUser(t.app, { email: 'victim@example.com' });
    const res = await exchange({ id_token: await p.sign(p.claims('stranger', { email: existing.email, email_verified: true })) });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'idp_oauth_not_bound', hosted_url: 'http://localhost:3000/account?bind=1' });
    const other = await exchange({ id_token: await p.sign(p.claims('stranger2', { email: 'nobody@example.com' })) });
    expect(other.statusCode).toBe(403);
    expect(Object.keys(other.json()).sort()).toEqual(Object.keys(res.json()).sort());
  });

  it('signs a bound user in with response_mode=session, once per id_token', async () => {
    const user = await bound('bob-sub');
    const id_token = await p.sign(p.claims('bob-sub'));
    const res = await exchange({ id_token, state: 'xyz' });
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body).toMatchObject({ status: 'ok', response_mode: 'session' });
    const claims = await t.app.tokens.verifySession(body.session, clientId);
    expect(claims.sub).toBe(user.id);
    const replay = await exchange({ id_token });
    expect(replay.statusCode).toBe(401);
    expect(replay.json().code).toBe('invalid_id_token');
  });

  it('a confidential app authenticates at exchange and resume, as at every door that issues its tokens', async () => {
    const secret = 'cs_native-secret-0123456789abcdefghij';
    const confidential = await makeApp(t.db, { type: 'confidential', redirectUris: [REDIRECT], clientSecret: secret });
    const user = await bound('confidential-sub');
    const native = (path: 'exchange' | 'resume', body: Record<string, unknown>, headers: Record<string, string> = {}) =>
      t.app.inject({ method: 'POST', url: `/oauth/idp/${path}`, headers, payload: { client_id: confidential.id, redirect_uri: REDIRECT, ...body } });

    // The attack: someone holding only the provider id_token (or a pending session) completes the app's sign-in without its secret.
    const idToken = await p.sign(p.claims('confidential-sub'));
    for (const secretPart of [{}, { client_secret: 'cs_wrong' }]) {
      const res = await native('exchange', { id_token: idToken, ...secretPart });
      expect(res.statusCode).toBe(401);
      expect(res.json().code).toBe('invalid_client');
      expect(res.headers['www-authenticate']).toMatch(/^Basic/);
    }
    // Positive control: with the secret in the body, and with Basic.
    const ok = await native('exchange', { id_token: idToken, client_secret: secret });
    expect(ok.statusCode, ok.body).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
    expect((await t.app.tokens.verifySession(ok.json().session, confidential.id)).sub).toBe(user.id);

    const session = ok.json().session as string;
    const anonymousResume = await native('resume', { session });
    expect(anonymousResume.statusCode).toBe(401);
    expect(anonymousResume.json().code).toBe('invalid_client');
    const basic = { authorization: `Basic ${Buffer.from(`${confidential.id}:${secret}`).toString('base64')}` };
    const resumed = await native('resume', { session }, basic);
    expect(resumed.statusCode, resumed.body).toBe(200);
    expect(resumed.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
  });

  it('checks the nonce: raw or its SHA-256 hex, mismatch and missing rejected', async () => {
    await bound('carol-sub');
    const nonce = 'n-0123456789';
    const hashed = createHash('sha256').update(nonce).digest('hex');
    expect((await exchange({ nonce, id_token: await p.sign(p.claims('carol-sub', { nonce: hashed })) })).statusCode).toBe(200);
    expect((await exchange({ nonce, id_token: await p.sign(p.claims('carol-sub', { nonce, jti: 'a' })) })).statusCode).toBe(200);
    expect((await exchange({ nonce, id_token: await p.sign(p.claims('carol-sub', { nonce: 'other' })) })).statusCode).toBe(401);
    expect((await exchange({ nonce, id_token: await p.sign(p.claims('carol-sub')) })).statusCode).toBe(401);
  });

  it('validates the request: exactly one of id_token/idp_code, PKCE for code mode, exact redirect_uri', async () => {
    const tok = await p.sign(p.claims('x'));
    expect((await exchange({})).json().code).toBe('invalid_request');
    expect((await exchange({ id_token: tok, idp_code: 'abc' })).json().code).toBe('invalid_request');
    expect((await exchange({ id_token: tok, response_mode: 'code' })).json().code).toBe('invalid_request');
    const wrong = await exchange({ id_token: tok, redirect_uri: `${REDIRECT}/` });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json().code).toBe('invalid_redirect_uri');
  });

  it('rejects a bad idp_code with invalid_idp_code', async () => {
    const res = await exchange({ idp_code: 'not-a-real-code' });
    expect(res.statusCode).toBe(401);
    expect(res.json().code).toBe('invalid_idp_code');
  });

  it('accepts tokens of a rotated key after exactly one JWKS refetch, once the last fetch is a minute old', async () => {
    // Time moves with the system clock, which jose's JWKS cache and the app's test clock both read.
    vi.useFakeTimers({ toFake: ['Date'], shouldAdvanceTime: true });
    try {
      await bound('dave-sub');
      expect((await exchange({ id_token: await p.sign(p.claims('dave-sub')) })).statusCode).toBe(200);
      const before = p.jwksHits;
      await p.rotate();
      vi.setSystemTime(Date.now() + 61_000);
      const res = await exchange({ id_token: await p.sign(p.claims('dave-sub', { jti: 'rot' })) });
      expect(res.statusCode).toBe(200);
      expect(p.jwksHits).toBe(before + 1);
      // Unknown kids do not cause a refetch storm.
      for (let i = 0; i < 5; i++) {
        const stray = await p.sign(p.claims('dave-sub', { jti: `s${i}` }), { key: { ...(await newRsaJwk()), kid: `unknown-${i}` } });
        expect((await exchange({ id_token: stray })).statusCode).toBe(401);
      }
      expect(p.jwksHits).toBeLessThanOrEqual(before + 2);
    } finally {
      vi.useRealTimers();
    }
  });
});

describe('provider not configured / unreachable', () => {
  let t: TestApp;
  let clientId: string;
  beforeAll(async () => {
    t = await buildTestApp();
    clientId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
  });
  afterAll(async () => t.close());

  it('exchange answers 503 idp_oauth_not_configured; start redirects with the error', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: clientId, redirect_uri: REDIRECT, id_token: 'a.b.c' } });
    expect(res.statusCode).toBe(503);
    expect(res.json().code).toBe('idp_oauth_not_configured');
    const start = await t.app.inject(`/oauth/idp/start?client_id=${clientId}&redirect_uri=${encodeURIComponent(REDIRECT)}&state=s1`);
    expect(start.statusCode).toBe(302);
    const loc = new URL(start.headers.location as string);
    expect(loc.protocol).toBe('com.example.app:');
    expect(loc.searchParams.get('error')).toBe('idp_oauth_not_configured');
    expect(loc.searchParams.get('state')).toBe('s1');
  });

  it('start never redirects to an unregistered redirect_uri', async () => {
    for (const uri of [`${REDIRECT}/`, 'https://evil.example/cb', '']) {
      const res = await t.app.inject(`/oauth/idp/start?client_id=${clientId}&redirect_uri=${encodeURIComponent(uri)}`);
      expect(res.statusCode).toBe(400);
      expect(res.headers.location).toBeUndefined();
      expect(res.headers['content-type']).toMatch(/text\/html/);
    }
  });

  it('admin: GET 404 when nothing is configured, PUT/GET/DELETE round trip, secret never returned', async () => {
    const auth = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    expect((await t.app.inject({ url: '/v1/admin/idp', headers: auth })).statusCode).toBe(404);
    const bad = await t.app.inject({ method: 'PUT', url: '/v1/admin/idp', headers: auth, payload: { issuer: 'http://idp.example', client_id: 'c', client_secret: 's', name: 'X' } });
    expect(bad.statusCode).toBe(400);
    const put = await t.app.inject({ method: 'PUT', url: '/v1/admin/idp', headers: auth, payload: { issuer: 'https://idp.example', client_id: 'c', client_secret: 'very-secret', audiences: ['c', 'ios'], name: 'Example' } });
    expect(put.statusCode).toBe(200);
    expect(put.body).not.toContain('very-secret');
    const get = await t.app.inject({ url: '/v1/admin/idp', headers: auth });
    expect(get.json()).toMatchObject({ issuer: 'https://idp.example', client_id: 'c', audiences: ['c', 'ios'], name: 'Example', source: 'settings' });
    const row = await t.db.selectFrom('settings').select('value').where('key', '=', 'idp').executeTakeFirstOrThrow();
    expect(row.value).not.toContain('very-secret');
    expect((await t.app.inject({ method: 'DELETE', url: '/v1/admin/idp', headers: auth })).statusCode).toBe(204);
    expect((await t.app.inject({ url: '/v1/admin/idp', headers: auth })).statusCode).toBe(404);
    expect((await t.app.inject({ url: '/v1/admin/idp' })).statusCode).toBe(401);
  });
});

describe('admin /v1/admin/idp with IDP_* in the environment', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IDP_ISSUER: 'https://idp.example', IDP_CLIENT_ID: 'c', IDP_CLIENT_SECRET: 'env-secret' } });
  });
  afterAll(async () => t.close());

  it('shows source env and refuses changes with 409 config_from_env', async () => {
    const auth = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const get = await t.app.inject({ url: '/v1/admin/idp', headers: auth });
    expect(get.json()).toMatchObject({ source: 'env', issuer: 'https://idp.example' });
    expect(get.body).not.toContain('env-secret');
    const put = await t.app.inject({ method: 'PUT', url: '/v1/admin/idp', headers: auth, payload: { issuer: 'https://x.example', client_id: 'c', name: 'X' } });
    expect(put.statusCode).toBe(409);
    expect(put.json().code).toBe('config_from_env');
    expect((await t.app.inject({ method: 'DELETE', url: '/v1/admin/idp', headers: auth })).statusCode).toBe(409);
  });
});
