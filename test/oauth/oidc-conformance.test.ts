import { createServer, type Server } from 'node:http';
import * as oidc from 'openid-client';
import type { Browser as PwBrowser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient, PASSWORD, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';

/**
 * OpenID Connect conformance (issue 12, docs/reference/oauth.md#openid-connect-what-is-implemented), driven the way a relying party drives it:
 * a listening Gatehouse, `openid-client` as the app (discovery, PKCE + state + nonce, ID token
 * validation including its `max_age` / `auth_time` check), Chromium for everything a browser does,
 * and plain HTTP where an app sends something openid-client does not (a form-body access token).
 * The app is a small HTTP server at an http://localhost origin: another site than Gatehouse's
 * 127.0.0.1, so SameSite=Lax applies as it does for real apps.
 * Time moves with the test clock only (never sleeps), and by less than openid-client's 30 s skew.
 */

const RP_NAME = 'Conformance RP';

describe.skipIf(!haveChromium)('OpenID Connect conformance (openid-client + Chromium)', () => {
  let t: TestApp;
  let base: string;
  let rpOrigin: string;
  let callbackUri: string;
  let logoutUri: string;
  let browser: PwBrowser;
  let client: TestClient;
  let other: TestClient;
  let config: oidc.Configuration;
  let rpServer: Server;
  /** HTML the app serves by path; any other path (its callbacks) answers a plain text page. */
  const rpPages = new Map<string, string>();

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    rpServer = createServer((req, res) => {
      const html = rpPages.get(new URL(req.url ?? '/', 'http://localhost').pathname);
      res.writeHead(200, { 'content-type': html ? 'text/html' : 'text/plain' }).end(html ?? 'app');
    });
    const rpPort = await freePort();
    await new Promise<void>((resolve) => rpServer.listen(rpPort, '127.0.0.1', resolve));
    rpOrigin = `http://localhost:${rpPort}`;
    callbackUri = `${rpOrigin}/cb`;
    logoutUri = `${rpOrigin}/bye`;
    // Many sign-ins from one address in a minute: the per-IP limit is not what is tested here.
    t = await buildTestApp({ env: { BASE_URL: base, IP_AUTH_PER_MINUTE: '1000' } });
    await t.app.listen({ port, host: '127.0.0.1' });
    client = await makeClient(t, { name: RP_NAME, redirectUris: [callbackUri, logoutUri] });
    other = await makeClient(t, { name: 'Other RP', redirectUris: ['https://other.example/cb'] });
    config = await oidc.discovery(new URL(base), client.app.id, undefined, oidc.None(), { execute: [oidc.allowInsecureRequests] });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    rpServer?.close();
    await t?.close();
  });

  /** A user of the app who has consented to the default scopes (a REST registration records it, docs/reference/rest-api.md#consent-from-a-rest-sign-in). */
  async function newUser(): Promise<string> {
    const email = uniqueEmail('oidc');
    const res = await fetch(`${base}/v1/auth/register`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email, password: PASSWORD, name: 'Olive Example', client_id: client.app.id }),
    });
    expect(res.status).toBe(201);
    return email;
  }

  interface Rp {
    context: BrowserContext;
    page: Page;
  }

  /** A fresh browser (no cookies) with one tab. */
  async function openRp(): Promise<Rp> {
    const context = await browser.newContext();
    return { context, page: await context.newPage() };
  }

  interface Flow {
    url: URL;
    verifier: string;
    state: string;
    nonce: string;
  }

  async function authorization(extra: Record<string, string> = {}): Promise<Flow> {
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const url = oidc.buildAuthorizationUrl(config, {
      redirect_uri: callbackUri,
      scope: 'openid profile email',
      code_challenge: await oidc.calculatePKCECodeChallenge(verifier),
      code_challenge_method: 'S256',
      state,
      nonce,
      ...extra,
    });
    return { url, verifier, state, nonce };
  }

  const path = (page: Page) => new URL(page.url()).pathname;
  const atCallback = (page: Page) => page.waitForURL((u) => u.href.startsWith(callbackUri));

  async function login(page: Page, email: string): Promise<void> {
    expect(path(page)).toBe('/login');
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[name=action][value=login]');
  }

  /** Runs the flow in the browser, signing in when the login page shows, and returns the callback URL. */
  async function run(rp: Rp, flow: Flow, email: string): Promise<URL> {
    await rp.page.goto(flow.url.href);
    if (path(rp.page) === '/login') await login(rp.page, email);
    await atCallback(rp.page);
    return new URL(rp.page.url());
  }

  const grant = (flow: Flow, callback: URL, maxAge?: number) =>
    oidc.authorizationCodeGrant(config, callback, {
      pkceCodeVerifier: flow.verifier,
      expectedState: flow.state,
      expectedNonce: flow.nonce,
      idTokenExpected: true,
      ...(maxAge !== undefined ? { maxAge } : {}),
    });

  /** The authorization error an app receives at its redirect URI (openid-client rejects the callback with it). */
  async function authorizationError(flow: Flow, callback: URL): Promise<string> {
    const error = await grant(flow, callback).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(oidc.AuthorizationResponseError);
    return (error as oidc.AuthorizationResponseError).error;
  }

  /** Where a request without a browser is sent (no cookie: the checks before the login step). */
  async function redirectOf(url: string, init: RequestInit = {}): Promise<{ status: number; location: URL | null; body: string }> {
    const res = await fetch(url, { redirect: 'manual', ...init });
    const location = res.headers.get('location');
    return { status: res.status, location: location ? new URL(location, url) : null, body: await res.text() };
  }

  it('discovery says what is supported: no request objects, no claims parameter, acr values, end_session_endpoint', () => {
    const metadata = config.serverMetadata();
    expect(metadata).toMatchObject({
      issuer: base,
      end_session_endpoint: `${base}/oauth/logout`,
      request_parameter_supported: false,
      request_uri_parameter_supported: false,
      claims_parameter_supported: false,
      prompt_values_supported: ['none', 'login', 'consent'],
      acr_values_supported: ['urn:gatehouse:acr:1fa', 'urn:gatehouse:acr:2fa'],
    });
    expect(metadata.claims_supported).toEqual(expect.arrayContaining(['auth_time', 'acr', 'amr']));
  });

  it('prompt=login: a signed-in browser authenticates again and returns to the app with a later auth_time', async () => {
    const email = await newUser();
    const rp = await openRp();
    const first = await authorization();
    const before = (await grant(first, await run(rp, first, email))).claims()!;

    t.clock.advance(3);
    const again = await authorization({ prompt: 'login' });
    await rp.page.goto(again.url.href);
    expect(path(rp.page)).toBe('/login'); // signed in, yet asked again
    await login(rp.page, email);
    await atCallback(rp.page); // back to the app, not the account page
    const after = (await grant(again, new URL(rp.page.url()))).claims()!;
    expect(after.sub).toBe(before.sub);
    expect(after.auth_time).toBeGreaterThanOrEqual(before.auth_time! + 3);

    // Without prompt=login the new session is used as it is.
    const plain = await authorization();
    await rp.page.goto(plain.url.href);
    await atCallback(rp.page);
    expect((await grant(plain, new URL(rp.page.url()))).claims()!.auth_time).toBe(after.auth_time);
    await rp.context.close();
  });

  it('max_age: an older authentication is redone (max_age=0 always), a recent one is kept, prompt=none cannot redo it', async () => {
    const email = await newUser();
    const rp = await openRp();
    const first = await authorization();
    const signedInAt = (await grant(first, await run(rp, first, email))).claims()!.auth_time!;

    t.clock.advance(2);
    // max_age=1 two seconds after sign-in: the login page, then a fresh auth_time that openid-client's max_age check accepts.
    const stale = await authorization({ max_age: '1' });
    await rp.page.goto(stale.url.href);
    expect(path(rp.page)).toBe('/login');
    await login(rp.page, email);
    await atCallback(rp.page);
    const fresh = (await grant(stale, new URL(rp.page.url()), 1)).claims()!;
    expect(fresh.auth_time).toBeGreaterThanOrEqual(signedInAt + 2);

    // A recent enough authentication is kept: no login page, auth_time present and unchanged.
    const recent = await authorization({ max_age: '3600' });
    await rp.page.goto(recent.url.href);
    await atCallback(rp.page);
    expect((await grant(recent, new URL(rp.page.url()), 3600)).claims()!.auth_time).toBe(fresh.auth_time);

    // max_age=0 behaves like prompt=login, even right after signing in.
    const zero = await authorization({ max_age: '0' });
    await rp.page.goto(zero.url.href);
    expect(path(rp.page)).toBe('/login');
    await login(rp.page, email);
    await atCallback(rp.page);
    expect((await grant(zero, new URL(rp.page.url()))).claims()!.auth_time).toEqual(expect.any(Number));

    // prompt=none cannot show the login page that max_age demands.
    t.clock.advance(2);
    const silent = await authorization({ prompt: 'none', max_age: '1' });
    await rp.page.goto(silent.url.href);
    await atCallback(rp.page);
    expect(await authorizationError(silent, new URL(rp.page.url()))).toBe('login_required');
    await rp.context.close();
  });

  it('prompt values combine as OIDC Core says, and a malformed max_age is refused', async () => {
    for (const [extra, error] of [
      [{ prompt: 'none login' }, 'invalid_request'],
      [{ prompt: 'none consent' }, 'invalid_request'],
      [{ prompt: 'select_account' }, 'invalid_request'],
      [{ max_age: '-1' }, 'invalid_request'],
      [{ max_age: 'soon' }, 'invalid_request'],
    ] as const) {
      const flow = await authorization(extra);
      const { status, location } = await redirectOf(flow.url.href);
      expect(status, JSON.stringify(extra)).toBe(302);
      expect(await authorizationError(flow, location!)).toBe(error);
    }
    // login + consent together is valid: the signed-out browser is simply sent to sign in.
    const both = await authorization({ prompt: 'login consent' });
    expect((await redirectOf(both.url.href)).location!.pathname).toBe('/login');
  });

  it('request objects are refused, never silently ignored: request_not_supported / request_uri_not_supported', async () => {
    const { privateKey } = (await crypto.subtle.generateKey({ name: 'ECDSA', namedCurve: 'P-256' }, false, ['sign', 'verify'])) as CryptoKeyPair;
    const flow = await authorization();
    const parameters = Object.fromEntries(flow.url.searchParams);

    // Everything inside the signed request object (openid-client's JAR): nothing verified to redirect to → the HTML page.
    const jarOnly = await oidc.buildAuthorizationUrlWithJAR(config, parameters, privateKey);
    expect(jarOnly.searchParams.get('redirect_uri')).toBeNull();
    const page = await redirectOf(jarOnly.href);
    expect(page.status).toBe(400);
    expect(page.location).toBeNull();
    expect(page.body).toContain('request_not_supported');

    // With redirect_uri and state in the request itself (state and nonce also only inside the object): the error redirect.
    const withRedirect = new URL(jarOnly);
    withRedirect.searchParams.set('redirect_uri', callbackUri);
    withRedirect.searchParams.set('response_type', 'code');
    withRedirect.searchParams.set('state', flow.state);
    const refused = await redirectOf(withRedirect.href);
    expect(refused.location!.href.startsWith(callbackUri)).toBe(true);
    expect(refused.location!.searchParams.get('code')).toBeNull();
    expect(await authorizationError(flow, refused.location!)).toBe('request_not_supported');

    const byReference = new URL(flow.url);
    byReference.searchParams.set('request_uri', 'https://app.example/request.jwt');
    const refusedUri = await redirectOf(byReference.href);
    expect(await authorizationError(flow, refusedUri.location!)).toBe('request_uri_not_supported');
  });

  it('POST /oauth/authorize with a form body behaves like GET: a signed-in browser gets its code, errors are the same', async () => {
    const email = await newUser();
    const rp = await openRp();
    const first = await authorization();
    await grant(first, await run(rp, first, email));

    // The app's page posts the request cross-site; prompt=none proves the browser's session was recognised.
    const flow = await authorization({ prompt: 'none' });
    const inputs = [...flow.url.searchParams].map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`).join('');
    rpPages.set('/start', `<!doctype html><form method="post" action="${base}/oauth/authorize">${inputs}<button id="go">Sign in</button></form>`);
    await rp.page.goto(`${rpOrigin}/start`);
    await rp.page.click('#go');
    await atCallback(rp.page);
    const tokens = await grant(flow, new URL(rp.page.url()));
    expect(tokens.claims()!.email).toBe(email);
    await rp.context.close();

    // Errors: the same error redirect as GET once client and redirect_uri are verified, the HTML page before.
    const post = (url: URL) => redirectOf(`${base}/oauth/authorize`, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded' }, body: url.searchParams });
    const badScope = await authorization({ scope: 'openid admin' });
    const viaPost = await post(badScope.url);
    const viaGet = await redirectOf(badScope.url.href);
    expect(viaPost.location?.href).toBe(viaGet.location?.href);
    expect(await authorizationError(badScope, viaPost.location!)).toBe('invalid_scope');
    const unknownClient = new URL(badScope.url);
    unknownClient.searchParams.set('client_id', 'app_unknown');
    const page = await post(unknownClient);
    expect(page.status).toBe(400);
    expect(page.location).toBeNull();
  });

  it('userinfo takes the access token from a POST form body (RFC 6750 §2.2), but not from two places or the query', async () => {
    const email = await newUser();
    const rp = await openRp();
    const flow = await authorization();
    const tokens = await grant(flow, await run(rp, flow, email));
    await rp.context.close();
    const viaHeader = await oidc.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub);

    const endpoint = config.serverMetadata().userinfo_endpoint!;
    const form = (body: Record<string, string>, headers: Record<string, string> = {}) =>
      fetch(endpoint, { method: 'POST', headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, body: new URLSearchParams(body) });
    const viaBody = await form({ access_token: tokens.access_token });
    expect(viaBody.status).toBe(200);
    expect(await viaBody.json()).toEqual(viaHeader);

    const twice = await form({ access_token: tokens.access_token }, { authorization: `Bearer ${tokens.access_token}` });
    expect(twice.status).toBe(400);
    expect(await twice.json()).toMatchObject({ error: 'invalid_request' });
    expect(twice.headers.get('www-authenticate')).toContain('error="invalid_request"');
    expect((await fetch(`${endpoint}?access_token=${tokens.access_token}`)).status).toBe(401);
    expect((await form({ access_token: 'not-a-token' })).status).toBe(401);
  });

  it('ID tokens carry acr (one of acr_values_supported) and auth_time, from the code and from a refresh', async () => {
    const email = await newUser();
    const rp = await openRp();
    const flow = await authorization({ acr_values: 'urn:example:gold' });
    const tokens = await grant(flow, await run(rp, flow, email));
    await rp.context.close();
    const supported = config.serverMetadata().acr_values_supported as string[];
    const claims = tokens.claims()!;
    expect(supported).toContain(claims.acr);
    expect(claims.auth_time).toEqual(expect.any(Number));
    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!);
    expect(refreshed.claims()).toMatchObject({ acr: claims.acr, auth_time: claims.auth_time, sub: claims.sub });
  });

  it('the claims parameter is not supported (as advertised): claims follow the scopes, and the request still succeeds', async () => {
    const email = await newUser();
    const rp = await openRp();
    const flow = await authorization({ scope: 'openid', claims: JSON.stringify({ id_token: { name: { essential: true } }, userinfo: { email: null } }) });
    const tokens = await grant(flow, await run(rp, flow, email));
    await rp.context.close();
    expect(tokens.claims()).not.toHaveProperty('name');
    expect(await oidc.fetchUserInfo(config, tokens.access_token, tokens.claims()!.sub)).toEqual({ sub: tokens.claims()!.sub });
  });

  it('RP-Initiated Logout: id_token_hint identifies the app (GET and POST), state comes back, ui_locales is honoured', async () => {
    const email = await newUser();
    const rp = await openRp();
    const flow = await authorization();
    const tokens = await grant(flow, await run(rp, flow, email));
    const idToken = tokens.id_token!;

    // As oidc-client-ts's signoutRedirect() sends it: id_token_hint without client_id (openid-client adds its own).
    const endSession = oidc.buildEndSessionUrl(config, { id_token_hint: idToken, post_logout_redirect_uri: logoutUri, state: 'bye-1', ui_locales: 'zh-CN' });
    endSession.searchParams.delete('client_id');
    await rp.page.goto(endSession.href);
    expect(await rp.page.getAttribute('html', 'lang')).toBe('zh-CN');
    expect(await rp.page.textContent('body')).toContain(RP_NAME);
    await rp.page.click('button[name=action][value=logout]');
    await rp.page.waitForURL((u) => u.href.startsWith(logoutUri));
    expect(new URL(rp.page.url()).searchParams.get('state')).toBe('bye-1');
    const silent = await authorization({ prompt: 'none' });
    await rp.page.goto(silent.url.href);
    await atCallback(rp.page);
    expect(await authorizationError(silent, new URL(rp.page.url()))).toBe('login_required');

    // The same request posted as a form by the app's page (the endpoint must accept POST).
    const again = await authorization();
    await run(rp, again, email);
    const fields = { id_token_hint: idToken, post_logout_redirect_uri: logoutUri, state: 'bye-2' };
    const inputs = Object.entries(fields).map(([name, value]) => `<input type="hidden" name="${name}" value="${value}">`).join('');
    rpPages.set('/logout', `<!doctype html><form method="post" action="${base}/oauth/logout">${inputs}<button id="go">Sign out</button></form>`);
    await rp.page.goto(`${rpOrigin}/logout`);
    await rp.page.click('#go');
    await rp.page.waitForSelector('button[name=action][value=logout]'); // the confirmation, in the signed-in session
    await rp.page.click('button[name=action][value=logout]');
    await rp.page.waitForURL((u) => u.href.startsWith(logoutUri));
    expect(new URL(rp.page.url()).searchParams.get('state')).toBe('bye-2');
    await rp.context.close();

    // A hint and a client_id that disagree, or a hint that is not ours: the HTML error page, no redirect.
    const endpoint = config.serverMetadata().end_session_endpoint!;
    const logout = (params: Record<string, string>) => redirectOf(`${endpoint}?${new URLSearchParams(params)}`);
    for (const params of [
      { id_token_hint: idToken, client_id: other.app.id, post_logout_redirect_uri: 'https://other.example/cb' } as Record<string, string>,
      { id_token_hint: `${idToken.slice(0, -4)}AAAA`, post_logout_redirect_uri: logoutUri },
      { id_token_hint: tokens.access_token, post_logout_redirect_uri: logoutUri },
    ]) {
      const res = await logout(params);
      expect(res.status).toBe(400);
      expect(res.location).toBeNull();
    }
    // Agreeing client_id and hint; and an expired hint still identifies the app (§2 lets the OP ignore exp).
    expect((await logout({ id_token_hint: idToken, client_id: client.app.id, post_logout_redirect_uri: logoutUri, state: 's' })).location?.href).toBe(`${logoutUri}?state=s`);
    t.clock.advance(t.config.ttl.accessToken + 60);
    expect((await logout({ id_token_hint: idToken, post_logout_redirect_uri: logoutUri, state: 'late' })).location?.href).toBe(`${logoutUri}?state=late`);
  });
});
