import { createHash, randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { Browser } from '../helpers/oauth-flows.js';
import { type ScriptedProvider, startScriptedProvider } from '../helpers/scripted-provider.js';

/**
 * Redeeming provider codes (src/idp/provider.ts, through openid-client): a token endpoint that fails
 * or does not answer is the provider being unavailable (502 at the native door, `temporarily_unavailable`
 * back at the app from the callback), never a 401; at the callback, the `iss` of the response (RFC 9207)
 * and the id_token's nonce are checked, and a response from another issuer never sends the code anywhere.
 */

const CLIENT_ID = 'gatehouse-client';
const CLIENT_SECRET = `secret-${randomBytes(12).toString('hex')}`;
const REDIRECT = 'com.example.app://cb';

let p: ScriptedProvider;
let t: TestApp;
let appId: string;
/** Every code and id_token handed to the provider: none may reach a log line. */
const secrets: string[] = [CLIENT_SECRET];

beforeAll(async () => {
  p = await startScriptedProvider({ clientId: CLIENT_ID, clientSecret: CLIENT_SECRET });
  t = await buildTestApp({ env: { IDP_ISSUER: p.issuer, IDP_CLIENT_ID: CLIENT_ID, IDP_CLIENT_SECRET: CLIENT_SECRET, IP_AUTH_PER_MINUTE: '100000' } });
  appId = (await makeApp(t.db, { redirectUris: [REDIRECT] })).id;
});
afterAll(async () => {
  await t?.close();
  await p?.close();
});

/** A user bound to a fresh provider subject; an id_token of that subject, with `extra` claims, behind a fresh code. */
async function boundCode(extra: Record<string, unknown> = {}): Promise<{ code: string; userId: string }> {
  const sub = `sub-${randomBytes(5).toString('hex')}`;
  const user = await makeUser(t.app);
  await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: sub, email: null, createdAt: t.clock.now() });
  const now = t.clock.now();
  const code = `code-${randomBytes(6).toString('hex')}`;
  const idToken = await p.sign({ iss: p.issuer, sub, aud: CLIENT_ID, iat: now, exp: now + 300, ...extra });
  p.codes.set(code, idToken);
  secrets.push(code, idToken);
  return { code, userId: user.id };
}

const nativeExchange = (code: string) => {
  const verifier = randomBytes(32).toString('base64url');
  return t.app.inject({ method: 'POST', url: '/oauth/idp/exchange', payload: { client_id: appId, redirect_uri: REDIRECT, idp_code: code, idp_redirect_uri: 'com.example.app://idp-cb', idp_code_verifier: verifier } });
};

/** Starts a browser sign-in; returns the browser and the provider authorization URL it was sent to. */
async function startBrowserSignIn(): Promise<{ browser: Browser; authorize: URL }> {
  const browser = new Browser(t.app);
  const challenge = createHash('sha256').update(randomBytes(32).toString('base64url')).digest('base64url');
  const start = await browser.get(`/oauth/idp/start?${new URLSearchParams({ client_id: appId, redirect_uri: REDIRECT, state: 'app-state', response_mode: 'code', code_challenge: challenge, code_challenge_method: 'S256' })}`);
  expect(start.statusCode).toBe(302);
  return { browser, authorize: new URL(start.headers.location as string) };
}

/** Where a callback sent the browser: back at the app, with its query. */
function backAtApp(location: unknown): URLSearchParams {
  const url = new URL(String(location));
  expect(`${url.protocol}//${url.host}${url.pathname}`).toBe(REDIRECT);
  expect(url.searchParams.get('state')).toBe('app-state');
  return url.searchParams;
}

describe('a token endpoint that fails or does not answer', () => {
  it.each(['json500', 'html502', 'reset', 'hang'] as const)('%s: 502 idp_unavailable at the native door, temporarily_unavailable from the callback, never 401', async (outage) => {
    p.tokenOutage = outage;
    try {
      const { code } = await boundCode();
      const started = performance.now();
      const native = await nativeExchange(code);
      expect(native.statusCode).toBe(502);
      expect(native.json()).toMatchObject({ code: 'idp_unavailable' });
      expect(native.json().session).toBeUndefined();
      // The client's timeout is 5 s.
      expect(performance.now() - started).toBeLessThan(10_000);

      const { browser, authorize } = await startBrowserSignIn();
      const callback = await browser.get(`/oauth/idp/callback?${new URLSearchParams({ code: (await boundCode({ nonce: authorize.searchParams.get('nonce') })).code, state: authorize.searchParams.get('state')! })}`);
      expect(callback.statusCode).toBe(302);
      const back = backAtApp(callback.headers.location);
      expect(back.get('error')).toBe('temporarily_unavailable');
      expect(back.get('code')).toBeNull();
    } finally {
      p.tokenOutage = null;
    }
  }, 30_000);

  it('the provider back: the same doors sign in', async () => {
    const native = await nativeExchange((await boundCode()).code);
    expect(native.statusCode).toBe(200);
    expect(native.json()).toMatchObject({ status: 'ok', response_mode: 'session' });
  });
});

describe('the callback', () => {
  it('a response naming another issuer (RFC 9207 mix-up) is refused before the code is sent anywhere', async () => {
    const { browser, authorize } = await startBrowserSignIn();
    const { code } = await boundCode({ nonce: authorize.searchParams.get('nonce') });
    const calls = p.tokenCalls;
    const callback = await browser.get(`/oauth/idp/callback?${new URLSearchParams({ code, state: authorize.searchParams.get('state')!, iss: 'https://attacker.example' })}`);
    expect(callback.statusCode).toBe(302);
    const back = backAtApp(callback.headers.location);
    expect(back.get('error')).toBe('invalid_id_token');
    expect(back.get('code')).toBeNull();
    expect(p.tokenCalls).toBe(calls);
    expect(p.codes.has(code)).toBe(true);
  });

  it('an id_token with another nonce than the one sent is refused; the right one signs in', async () => {
    const wrong = await startBrowserSignIn();
    const refused = await wrong.browser.get(`/oauth/idp/callback?${new URLSearchParams({ code: (await boundCode({ nonce: 'another-nonce' })).code, state: wrong.authorize.searchParams.get('state')!, iss: p.issuer })}`);
    expect(refused.statusCode).toBe(302);
    expect(backAtApp(refused.headers.location).get('error')).toBe('invalid_id_token');

    const right = await startBrowserSignIn();
    const { code } = await boundCode({ nonce: right.authorize.searchParams.get('nonce') });
    const signedIn = await right.browser.get(`/oauth/idp/callback?${new URLSearchParams({ code, state: right.authorize.searchParams.get('state')!, iss: p.issuer })}`);
    expect(signedIn.statusCode).toBe(303);
    // A new user owes consent: the hosted step, on the way back to the app.
    expect(new URL(String(signedIn.headers.location)).pathname).toBe('/oauth/authorize');
  });
});

describe('the log of these refusals', () => {
  it('says why each was refused, and holds no code, id_token or client secret', () => {
    const lines = t.logs.join('\n');
    expect(lines).toMatch(/"detail":"token request failed: TypeError: fetch failed/);
    expect(lines).toMatch(/"detail":"token endpoint answered 500"/);
    expect(lines).toMatch(/"detail":"unexpected \\"iss\\" \(issuer\) response parameter value"/);
    expect(lines).toMatch(/"detail":"unexpected ID Token \\"nonce\\" claim value"/);
    expectNoSecretsInLogs(t.logs, secrets);
  });
});
