import { generateKeyPair, generateProof, type KeyPair } from 'dpop';
import { calculateJwkThumbprint, decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { Browser, followToCallback, makeClient, pkcePair, relative, type TestClient } from '../helpers/oauth-flows.js';

/**
 * Conformance-style checks of the FAPI 2.0 Security Profile behaviours that apply to Gatehouse
 * (docs/reference/oauth.md#fapi-20-security-profile), for apps that turn on both
 * `require_pushed_authorization_requests` and `dpop_bound_access_tokens`: PAR required, PKCE with S256
 * only (confidential clients included), only `response_type=code`, exact redirect URIs, `request_uri`
 * single use and short-lived, `iss` in every authorization response (RFC 9207), codes of at most 60 s
 * used once, DPoP-bound access tokens and public clients' refresh tokens, no 307 redirects.
 */

const BASE = 'http://localhost:3000';
const CALLBACK = 'https://fapi.example/cb';

describe('FAPI 2.0 Security Profile behaviours', () => {
  let t: TestApp;
  let spa: TestClient;
  let backend: TestClient;

  beforeAll(async () => {
    t = await buildTestApp({ env: { DPOP_NONCES: '0' } });
    const fapi = { redirectUris: [CALLBACK], oauth: { dpopBoundAccessTokens: true, requirePushedAuthorizationRequests: true, deviceAuthorizationGrant: false } };
    spa = await makeClient(t, { name: 'FAPI SPA', ...fapi });
    backend = await makeClient(t, { name: 'FAPI backend', type: 'confidential', ...fapi });
  });
  afterAll(async () => t?.close());

  const proof = (keys: KeyPair, path: string, method = 'POST', accessToken?: string) => generateProof(keys, `${BASE}${path}`, method, undefined, accessToken);

  const form = (url: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, payload: new URLSearchParams(body).toString() });

  /** The client's credentials as form fields. */
  const auth = (client: TestClient) => ({ client_id: client.app.id, ...(client.secret ? { client_secret: client.secret } : {}) });

  const push = (client: TestClient, params: Record<string, string>, headers: Record<string, string> = {}) => form('/oauth/par', { ...auth(client), ...params }, headers);

  const authorizeRequest = (challenge: string) => ({ response_type: 'code', redirect_uri: CALLBACK, scope: 'openid profile', state: 'fapi-state', code_challenge: challenge, code_challenge_method: 'S256' });

  /** PAR with a proof, the browser through sign-in and consent, the callback. */
  async function authorizeWithPar(client: TestClient, keys: KeyPair) {
    const { verifier, challenge } = pkcePair();
    const pushed = await push(client, authorizeRequest(challenge), { dpop: await proof(keys, '/oauth/par') });
    expect(pushed.statusCode, pushed.body).toBe(201);
    const browser = new Browser(t.app);
    await browser.register();
    const callback = await followToCallback(browser, `/oauth/authorize?${new URLSearchParams({ client_id: client.app.id, request_uri: pushed.json().request_uri })}`, CALLBACK);
    return { verifier, callback };
  }

  const redeem = async (client: TestClient, code: string, verifier: string, keys?: KeyPair) =>
    form('/oauth/token', { ...auth(client), grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: verifier }, keys ? { dpop: await proof(keys, '/oauth/token') } : {});

  it('PAR is required: a front-channel request is refused with an error redirect carrying iss, and issues no code', async () => {
    const browser = new Browser(t.app);
    await browser.register();
    const codesBefore = await countAll(t.db, 'authorization_codes');
    for (const client of [spa, backend]) {
      const res = await browser.get(`/oauth/authorize?${new URLSearchParams({ client_id: client.app.id, ...authorizeRequest(pkcePair().challenge) })}`);
      expect(res.statusCode).toBe(302);
      const back = new URL(String(res.headers.location));
      expect(back.origin + back.pathname).toBe(CALLBACK);
      expect(back.searchParams.get('error')).toBe('invalid_request');
      expect(back.searchParams.get('iss')).toBe(BASE);
      expect(back.searchParams.get('state')).toBe('fapi-state');
      expect(back.searchParams.get('code')).toBeNull();
    }
    expect(await countAll(t.db, 'authorization_codes')).toBe(codesBefore);
  });

  it('PKCE with S256 only, for public and confidential clients alike', async () => {
    const { challenge } = pkcePair();
    for (const client of [spa, backend]) {
      const cases: Record<string, string>[] = [
        { code_challenge: challenge, code_challenge_method: 'plain' },
        { code_challenge: challenge },
        { code_challenge_method: 'S256' },
        {},
      ];
      for (const pkce of cases) {
        const { code_challenge: _c, code_challenge_method: _m, ...rest } = authorizeRequest(challenge);
        const res = await push(client, { ...rest, ...pkce });
        expect(res.statusCode, `${client.app.type} ${JSON.stringify(pkce)}`).toBe(400);
        expect(res.json().error).toBe('invalid_request');
      }
    }
    const discovery = (await t.app.inject('/.well-known/openid-configuration')).json();
    expect(discovery.code_challenge_methods_supported).toEqual(['S256']);
  });

  it('only response_type=code', async () => {
    const { challenge } = pkcePair();
    for (const responseType of ['token', 'id_token', 'code id_token', 'code token', 'none']) {
      const res = await push(backend, { ...authorizeRequest(challenge), response_type: responseType });
      expect(res.statusCode, responseType).toBe(400);
      expect(res.json().error).toBe('unsupported_response_type');
    }
    expect((await t.app.inject('/.well-known/openid-configuration')).json().response_types_supported).toEqual(['code']);
  });

  it('redirect_uri: required at PAR and matched exactly', async () => {
    const { challenge } = pkcePair();
    const { redirect_uri: _r, ...withoutRedirect } = authorizeRequest(challenge);
    expect((await push(spa, withoutRedirect)).json().error).toBe('invalid_request');
    for (const near of [`${CALLBACK}/`, 'https://FAPI.example/cb', 'https://fapi.example/CB', `${CALLBACK}?x=1`, `${CALLBACK}#f`, 'https://fapi.example:8443/cb', 'http://fapi.example/cb', 'https://fapi.example/cb/../cb']) {
      const res = await push(spa, { ...authorizeRequest(challenge), redirect_uri: near });
      expect(res.statusCode, near).toBe(400);
      expect(res.json().error, near).toBe('invalid_request');
    }
  });

  it('request_uri: at most 60 s (FAPI: under 600 s), once, only by the client that pushed it', async () => {
    const { challenge } = pkcePair();
    const pushed = (await push(spa, authorizeRequest(challenge))).json();
    expect(pushed.expires_in).toBeGreaterThan(0);
    expect(pushed.expires_in).toBeLessThanOrEqual(60);
    const browser = new Browser(t.app);
    await browser.register();
    const url = (clientId: string, requestUri: string) => `/oauth/authorize?${new URLSearchParams({ client_id: clientId, request_uri: requestUri })}`;
    expect((await browser.get(url(backend.app.id, pushed.request_uri))).body).toContain('invalid_request_uri');
    // Presenting it for another client used it up.
    expect((await browser.get(url(spa.app.id, pushed.request_uri))).body).toContain('invalid_request_uri');

    const late = (await push(spa, authorizeRequest(challenge))).json();
    t.clock.advance(pushed.expires_in + 1);
    try {
      const expired = await browser.get(url(spa.app.id, late.request_uri));
      expect(expired.statusCode).toBe(400);
      expect(expired.body).toContain('invalid_request_uri');
    } finally {
      t.clock.advance(-(pushed.expires_in + 1));
    }
  });

  it('the authorization response carries iss (RFC 9207), by 302 or 303 and never 307; a code lives at most 60 s and is used once', async () => {
    expect((await t.app.inject('/.well-known/openid-configuration')).json().authorization_response_iss_parameter_supported).toBe(true);
    const keys = await generateKeyPair('ES256');
    const { verifier, callback } = await authorizeWithPar(spa, keys);
    expect(callback.searchParams.get('iss')).toBe(BASE);
    expect(callback.searchParams.get('state')).toBe('fapi-state');

    const code = callback.searchParams.get('code')!;
    t.clock.advance(61);
    try {
      expect((await redeem(spa, code, verifier, keys)).json().error).toBe('invalid_grant');
    } finally {
      t.clock.advance(-61);
    }
    const fresh = await authorizeWithPar(spa, keys);
    const freshCode = fresh.callback.searchParams.get('code')!;
    expect((await redeem(spa, freshCode, fresh.verifier, keys)).statusCode).toBe(200);
    expect((await redeem(spa, freshCode, fresh.verifier, keys)).json().error).toBe('invalid_grant');

    // Every redirect of the flow, from the request to the callback.
    const redirects: number[] = [];
    const { challenge } = pkcePair();
    const pushed = (await push(spa, authorizeRequest(challenge), { dpop: await proof(keys, '/oauth/par') })).json();
    const walker = new Browser(t.app);
    let res = await walker.get(`/oauth/authorize?${new URLSearchParams({ client_id: spa.app.id, request_uri: pushed.request_uri })}`);
    redirects.push(res.statusCode);
    const { email } = await new Browser(t.app).register();
    res = await walker.login(email);
    redirects.push(res.statusCode);
    for (let i = 0; i < 4 && !String(res.headers.location).startsWith(CALLBACK); i++) {
      const path = relative(String(res.headers.location));
      res = path.startsWith('/consent') ? await walker.submit(path, { action: 'allow' }) : await walker.get(path);
      redirects.push(res.statusCode);
    }
    expect(String(res.headers.location)).toMatch(/^https:\/\/fapi\.example\/cb\?code=/);
    for (const status of redirects) expect([302, 303]).toContain(status);
  });

  it('DPoP-bound: no token without a proof; the access token carries cnf.jkt and works only as DPoP; a public client’s refresh token is bound', async () => {
    const keys = await generateKeyPair('ES256');
    const jkt = await calculateJwkThumbprint(keys.publicKey as never);
    for (const client of [spa, backend]) {
      const { verifier, callback } = await authorizeWithPar(client, keys);
      const code = callback.searchParams.get('code')!;
      // The code was bound at PAR: neither no proof nor another key redeems it, and neither burns it.
      expect((await redeem(client, code, verifier)).json().error).toBe('invalid_dpop_proof');
      expect((await redeem(client, code, verifier, await generateKeyPair('ES256'))).json().error).toBe('invalid_dpop_proof');
      const res = await redeem(client, code, verifier, keys);
      expect(res.statusCode, res.body).toBe(200);
      const tokens = res.json() as { token_type: string; access_token: string; refresh_token: string };
      expect(tokens.token_type).toBe('DPoP');
      expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt });

      const asBearer = await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(asBearer.statusCode).toBe(401);
      const asDpop = await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `DPoP ${tokens.access_token}`, dpop: await proof(keys, '/oauth/userinfo', 'GET', tokens.access_token) } });
      expect(asDpop.statusCode).toBe(200);

      const refresh = async (k?: KeyPair) => form('/oauth/token', { ...auth(client), grant_type: 'refresh_token', refresh_token: tokens.refresh_token }, k ? { dpop: await proof(k, '/oauth/token') } : {});
      // The app requires DPoP: no refresh without a proof, whatever the client type.
      expect((await refresh()).json().error).toBe('invalid_dpop_proof');
      if (client.app.type === 'public') {
        // The public client's refresh token is bound to the key: another key is refused too.
        expect((await refresh(await generateKeyPair('ES256'))).json().error).toBe('invalid_dpop_proof');
      }
      const rotated = await refresh(keys);
      expect(rotated.statusCode, rotated.body).toBe(200);
      expect(decodeJwt(rotated.json().access_token).cnf).toEqual({ jkt });
    }
  });
});
