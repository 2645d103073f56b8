import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import type { TestApp } from '../helpers/app.js';
import { Browser, followToCallback, makeClient, relative, type TestClient } from '../helpers/oauth-flows.js';
import { listeningTestApp } from '../helpers/processes.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';

/**
 * Pushed authorization requests (docs/reference/oauth.md#pushed-authorization-requests-rfc-9126) with
 * `oauth4webapi`, unmodified, against a listening server: PAR, then the code flow with PKCE; and the
 * refusals: a request_uri replayed, of another client, expired; plain requests of an app that requires
 * PAR; a confidential client without its secret; a bad redirect_uri at PAR.
 */

const CALLBACK = 'https://spa.par.test/callback';
const insecure = { [oauth.allowInsecureRequests]: true } as const;

const callbackOf = (browser: Browser, url: string): Promise<URL> => followToCallback(browser, url, CALLBACK);

describe('pushed authorization requests (RFC 9126)', () => {
  let t: TestApp;
  let base: string;
  let as: oauth.AuthorizationServer;
  let spa: TestClient;
  let other: TestClient;
  let backend: TestClient;
  let strict: TestClient;

  beforeAll(async () => {
    ({ t, base } = await listeningTestApp());
    spa = await makeClient(t, { name: 'PAR SPA', redirectUris: [CALLBACK] });
    other = await makeClient(t, { name: 'Other SPA', redirectUris: [CALLBACK] });
    backend = await makeClient(t, { name: 'PAR backend', type: 'confidential', redirectUris: [CALLBACK] });
    strict = await makeClient(t, { name: 'PAR only', redirectUris: [CALLBACK], oauth: { dpopBoundAccessTokens: false, requirePushedAuthorizationRequests: true, deviceAuthorizationGrant: false } });
    const issuer = new URL(base);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, insecure));
  });
  afterAll(async () => t?.close());

  async function push(client: TestClient, extra: Record<string, string> = {}) {
    const oc: oauth.Client = { client_id: client.app.id };
    const auth = client.secret ? oauth.ClientSecretBasic(client.secret) : oauth.None();
    const verifier = oauth.generateRandomCodeVerifier();
    const params = {
      redirect_uri: CALLBACK, response_type: 'code', scope: 'openid profile email', state: 's1',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', ...extra,
    };
    const pushed = await oauth.processPushedAuthorizationResponse(as, oc, await oauth.pushedAuthorizationRequest(as, oc, auth, params, insecure));
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({ client_id: oc.client_id, request_uri: pushed.request_uri }).toString();
    return { oc, auth, verifier, pushed, url: url.href };
  }

  async function redeem(p: Awaited<ReturnType<typeof push>>, callback: URL) {
    const params = oauth.validateAuthResponse(as, p.oc, callback, 's1');
    return oauth.processAuthorizationCodeResponse(as, p.oc, await oauth.authorizationCodeGrantRequest(as, p.oc, p.auth, params, CALLBACK, p.verifier, insecure));
  }

  async function signedIn(): Promise<Browser> {
    const browser = new Browser(t.app);
    await browser.register();
    return browser;
  }

  /** The hosted error page a refused request_uri gets (no redirect: nothing verified to redirect to). */
  async function refusedPage(browser: Browser, url: string): Promise<string> {
    const res = await browser.get(relative(url));
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    return res.body;
  }

  it('discovery names the endpoint; PAR then the code flow with PKCE, public and confidential', async () => {
    expect(as.pushed_authorization_request_endpoint).toBe(`${base}/oauth/par`);
    expect(as.require_pushed_authorization_requests).toBe(false);

    const p = await push(spa);
    expect(p.pushed.request_uri).toMatch(/^urn:ietf:params:oauth:request_uri:[A-Za-z0-9_-]{43}$/);
    expect(p.pushed.expires_in).toBe(60);
    // Stored hashed: the request_uri itself appears nowhere in the table.
    const rows = await t.db.selectFrom('pushed_authorization_requests').selectAll().execute();
    expect(JSON.stringify(rows)).not.toContain(p.pushed.request_uri.slice(-43));

    const tokens = await redeem(p, await callbackOf(await signedIn(), p.url));
    // A live request_uri is a bearer reference: the request log shows it redacted.
    expect(t.logs.join('\n')).not.toContain(p.pushed.request_uri.slice(-43));
    expect(decodeJwt(tokens.access_token).client_id ?? decodeJwt(tokens.access_token).aud).toBeTruthy();
    expect(tokens.id_token).toBeTruthy();

    const b = await push(backend);
    const backendTokens = await redeem(b, await callbackOf(await signedIn(), b.url));
    expect(backendTokens.access_token).toBeTruthy();
  });

  it('only client_id and request_uri count at /oauth/authorize: other query parameters are ignored', async () => {
    const p = await push(spa);
    const url = new URL(p.url);
    url.searchParams.set('redirect_uri', 'https://evil.example/cb');
    url.searchParams.set('scope', 'openid offline_access');
    url.searchParams.set('state', 'forged');
    const callback = await callbackOf(await signedIn(), url.href);
    expect(callback.searchParams.get('state')).toBe('s1');
    expect(await redeem(p, callback)).toMatchObject({ scope: 'email openid profile' });
  });

  it('a request_uri works once: a replay is invalid_request_uri, as is an unknown one', async () => {
    const p = await push(spa);
    const browser = await signedIn();
    await callbackOf(browser, p.url);
    expect(await refusedPage(browser, p.url)).toContain('invalid_request_uri');

    // Unknown values of our form, too.
    expect(await refusedPage(browser, `/oauth/authorize?client_id=${spa.app.id}&request_uri=urn:ietf:params:oauth:request_uri:nope`)).toContain('invalid_request_uri');
  });

  it('a request_uri is bound to the client that pushed it, and presenting it elsewhere uses it up', async () => {
    const p = await push(spa);
    const browser = await signedIn();
    const stolen = new URL(p.url);
    stolen.searchParams.set('client_id', other.app.id);
    expect(await refusedPage(browser, stolen.href)).toContain('invalid_request_uri');
    expect(await refusedPage(browser, p.url)).toContain('invalid_request_uri');
  });

  it('a request_uri expires after 60 seconds', async () => {
    const p = await push(spa);
    t.clock.advance(61);
    try {
      expect(await refusedPage(await signedIn(), p.url)).toContain('invalid_request_uri');
    } finally {
      t.clock.advance(-61);
    }
  });

  it('an app that requires PAR refuses plain requests, and a pushed one survives the sign-in it leads to', async () => {
    const browser = new Browser(t.app);
    const plain = new URLSearchParams({
      client_id: strict.app.id, redirect_uri: CALLBACK, response_type: 'code', state: 's1',
      code_challenge: await oauth.calculatePKCECodeChallenge(oauth.generateRandomCodeVerifier()), code_challenge_method: 'S256',
    });
    const refused = await browser.get(`/oauth/authorize?${plain}`);
    expect(refused.statusCode).toBe(302);
    const error = new URL(String(refused.headers.location));
    expect(error.origin + error.pathname).toBe(CALLBACK);
    expect(error.searchParams.get('error')).toBe('invalid_request');
    expect(error.searchParams.get('code')).toBeNull();
    // By form POST too.
    const posted = await browser.post('/oauth/authorize', Object.fromEntries(plain));
    expect(new URL(String(posted.headers.location)).searchParams.get('error')).toBe('invalid_request');

    // Signed out: the pushed request goes to the login page and resumes from the session afterwards.
    const p = await push(strict);
    const toLogin = await browser.get(relative(p.url));
    expect(relative(String(toLogin.headers.location))).toMatch(/^\/login/);
    const { email } = await new Browser(t.app).register();
    const loggedIn = await browser.login(email);
    expect(loggedIn.statusCode, loggedIn.body.slice(0, 300)).toBe(303);
    expect(String(loggedIn.headers.location)).toMatch(/^\/oauth\/authorize\?/);
    // That path, in another browser, is a plain request: refused.
    const elsewhere = await new Browser(t.app).get(String(loggedIn.headers.location));
    expect(new URL(String(elsewhere.headers.location)).searchParams.get('error')).toBe('invalid_request');
    const tokens = await redeem(p, await callbackOf(browser, String(loggedIn.headers.location)));
    expect(tokens.access_token).toBeTruthy();
  });

  it('PAR refuses a confidential client without its secret, a bad redirect_uri, and request_uri inside', async () => {
    const form = (body: Record<string, string>, headers: Record<string, string> = {}) =>
      fetch(`${base}/oauth/par`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(body) });
    const request = { response_type: 'code', redirect_uri: CALLBACK, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' };

    const noSecret = await form({ ...request, client_id: backend.app.id });
    expect(noSecret.status).toBe(401);
    expect(await noSecret.json()).toMatchObject({ error: 'invalid_client' });
    const wrongSecret = await form({ ...request, client_id: backend.app.id, client_secret: 'wrong' });
    expect(wrongSecret.status).toBe(401);

    const badRedirect = await form({ ...request, client_id: spa.app.id, redirect_uri: 'https://evil.example/cb' });
    expect(badRedirect.status).toBe(400);
    expect(await badRedirect.json()).toMatchObject({ error: 'invalid_request' });
    expect(badRedirect.headers.get('cache-control')).toBe('no-store');

    const noPkce = await form({ response_type: 'code', redirect_uri: CALLBACK, client_id: spa.app.id });
    expect(await noPkce.json()).toMatchObject({ error: 'invalid_request' });
    const badScope = await form({ ...request, client_id: spa.app.id, scope: 'openid admin' });
    expect(await badScope.json()).toMatchObject({ error: 'invalid_scope' });
    const nested = await form({ ...request, client_id: spa.app.id, request_uri: 'urn:ietf:params:oauth:request_uri:x' });
    expect(await nested.json()).toMatchObject({ error: 'invalid_request' });

    const before = await t.db.selectFrom('pushed_authorization_requests').select('uri_hash').execute();
    await form({ ...request, client_id: spa.app.id, scope: 'openid admin' });
    expect(await t.db.selectFrom('pushed_authorization_requests').select('uri_hash').execute()).toHaveLength(before.length);

    // CORS like /oauth/token: the app's origin may call it from a browser.
    const cors = await form({ ...request, client_id: spa.app.id }, { origin: 'https://spa.par.test' });
    expect(cors.status).toBe(201);
    expect(cors.headers.get('access-control-allow-origin')).toBe('https://spa.par.test');
  });

  it('a DPoP proof at PAR binds the code to its key (RFC 9449 §10.1); a dpop_jkt naming another key is refused', async () => {
    const oc: oauth.Client = { client_id: spa.app.id };
    const keyPair = await oauth.generateKeyPair('ES256');
    const dpop = oauth.DPoP(oc, keyPair);
    const verifier = oauth.generateRandomCodeVerifier();
    const params = { redirect_uri: CALLBACK, response_type: 'code', scope: 'openid', state: 's1', code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256' };
    const pushOnce = async (extra: Record<string, string> = {}) => {
      try {
        return await oauth.processPushedAuthorizationResponse(as, oc, await oauth.pushedAuthorizationRequest(as, oc, oauth.None(), { ...params, ...extra }, { DPoP: dpop, ...insecure }));
      } catch (error) {
        if (!oauth.isDPoPNonceError(error)) throw error;
        return oauth.processPushedAuthorizationResponse(as, oc, await oauth.pushedAuthorizationRequest(as, oc, oauth.None(), { ...params, ...extra }, { DPoP: dpop, ...insecure }));
      }
    };
    const otherJkt = await calculateJwkThumbprint(await exportJWK((await oauth.generateKeyPair('ES256')).publicKey));
    await expect(pushOnce({ dpop_jkt: otherJkt })).rejects.toMatchObject({ error: 'invalid_dpop_proof' });

    const pushed = await pushOnce();
    const callback = await callbackOf(await signedIn(), `/oauth/authorize?client_id=${oc.client_id}&request_uri=${encodeURIComponent(pushed.request_uri)}`);
    const code = callback.searchParams.get('code')!;
    const stored = await t.db.selectFrom('authorization_codes').select('dpop_jkt').where('dpop_jkt', 'is not', null).execute();
    expect(stored.map((r) => r.dpop_jkt)).toContain(await calculateJwkThumbprint(await exportJWK(keyPair.publicKey)));
    // Without the proof the code does not redeem (and is not burned); with it, a DPoP-bound token.
    const bare = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: CALLBACK, code_verifier: verifier, client_id: oc.client_id }),
    });
    expect(await bare.json()).toMatchObject({ error: 'invalid_dpop_proof' });
    const validated = oauth.validateAuthResponse(as, oc, callback, 's1');
    const redeem = async () => oauth.processAuthorizationCodeResponse(as, oc, await oauth.authorizationCodeGrantRequest(as, oc, oauth.None(), validated, CALLBACK, verifier, { DPoP: dpop, ...insecure }));
    const tokens = await redeem().catch((error) => (oauth.isDPoPNonceError(error) ? redeem() : Promise.reject(error)));
    expect(tokens.token_type).toBe('dpop');
  });

  it('the developer API sets, shows and changes require_pushed_authorization_requests (default false)', async () => {
    const dev = await createDeveloperViaApi(t);
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(dev.apiKey), payload: appBody() });
    expect(created.statusCode).toBe(201);
    expect(created.json().require_pushed_authorization_requests).toBe(false);
    const id = created.json().id as string;
    const patched = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey), payload: { require_pushed_authorization_requests: true } });
    expect(patched.statusCode).toBe(200);
    const viewed = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey) });
    expect(viewed.json().require_pushed_authorization_requests).toBe(true);
    const bad = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey), payload: { require_pushed_authorization_requests: 'yes' } });
    expect(bad.statusCode).toBe(400);
  });
});
