import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ERROR_REASONS, type ErrorReason } from '../../src/errors.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { authorizeAndGetCode, Browser, exchangeCode, makeClient, pkcePair, refresh, tokenRequest, type TestClient } from '../helpers/oauth-flows.js';

/**
 * Developer feedback (issue 15): outside production `error_description` names the exact reason a
 * request failed; production keeps the generic text. The authorize error page shows the refused
 * redirect_uri (escaped), and outside production the registered value it nearly matches.
 */

const GENERIC_GRANT = 'The grant is invalid, expired or revoked.';

function expectReason(res: { statusCode: number; json(): unknown }, error: string, reason: ErrorReason, status = 400) {
  expect(res.statusCode).toBe(status);
  expect(res.json()).toEqual({ error, error_description: ERROR_REASONS[reason].en });
}

it('every reason fits error_description (RFC 6749 §5.2: printable ASCII without " and \\)', () => {
  for (const reason of Object.values(ERROR_REASONS)) expect(reason.en).toMatch(/^[\x20\x21\x23-\x5b\x5d-\x7e]+$/);
});

describe('developer feedback outside production', () => {
  let t: TestApp;
  let appA: TestClient;
  let appB: TestClient;
  let confidential: TestClient;
  let alice: Browser;

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeClient(t, { redirectUris: ['https://a.example/cb/', 'http://127.0.0.1:8080/cb'] });
    appB = await makeClient(t, { redirectUris: ['https://b.example/cb'] });
    confidential = await makeClient(t, { type: 'confidential', redirectUris: ['https://c.example/cb'] });
    alice = new Browser(t.app);
    await alice.register();
  });
  afterAll(async () => t.close());

  const codeFor = (client: TestClient, options: Parameters<typeof authorizeAndGetCode>[2] = {}) => authorizeAndGetCode(alice, client, { scope: 'openid', ...options });

  it('names each failed check of the authorization_code grant', async () => {
    let c = await codeFor(appA);
    expectReason(await exchangeCode(t.app, appA, c.code, undefined), 'invalid_grant', 'code_verifier_missing');
    c = await codeFor(appA);
    expectReason(await exchangeCode(t.app, appA, c.code, pkcePair().verifier), 'invalid_grant', 'code_verifier_mismatch');
    c = await codeFor(appA);
    expectReason(await exchangeCode(t.app, appA, c.code, c.verifier, 'http://127.0.0.1:8080/cb'), 'invalid_grant', 'redirect_uri_mismatch');
    c = await codeFor(appA);
    expectReason(await exchangeCode(t.app, appA, c.code, 'short'), 'invalid_grant', 'code_verifier_malformed');
    const withoutPkce = await codeFor(confidential, { pkce: null });
    expectReason(await exchangeCode(t.app, confidential, withoutPkce.code, pkcePair().verifier), 'invalid_grant', 'code_verifier_unexpected');

    c = await codeFor(appA);
    expectReason(await exchangeCode(t.app, appB, c.code, c.verifier, appB.app.redirectUris[0]), 'invalid_grant', 'code_other_client');
    expect((await exchangeCode(t.app, appA, c.code, c.verifier)).statusCode).toBe(200);
    expectReason(await exchangeCode(t.app, appA, c.code, c.verifier), 'invalid_grant', 'code_replayed');
    expectReason(await exchangeCode(t.app, appA, 'ac_never_issued', c.verifier), 'invalid_grant', 'code_unknown');

    c = await codeFor(appA);
    t.clock.advance(61);
    expectReason(await exchangeCode(t.app, appA, c.code, c.verifier), 'invalid_grant', 'code_expired');
  });

  it('names why a refresh token or a client is refused', async () => {
    const c = await codeFor(appA);
    const first = (await exchangeCode(t.app, appA, c.code, c.verifier)).json() as { refresh_token: string };
    expectReason(await refresh(t.app, appB, first.refresh_token), 'invalid_grant', 'refresh_token_other_client');
    expect((await refresh(t.app, appA, first.refresh_token)).statusCode).toBe(200);
    t.clock.advance(t.config.ttl.refreshReuseGrace + 1);
    expectReason(await refresh(t.app, appA, first.refresh_token), 'invalid_grant', 'refresh_token_reused');
    expectReason(await refresh(t.app, appA, 'rt_never_issued'), 'invalid_grant', 'refresh_token_unknown');

    expectReason(await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_x', client_id: 'app_missing' }), 'invalid_client', 'client_unknown', 401);
    expectReason(await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_x', client_id: confidential.app.id }), 'invalid_client', 'client_secret_missing', 401);
    expectReason(
      await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_x', client_id: confidential.app.id, client_secret: 'cs_wrong' }),
      'invalid_client',
      'client_secret_wrong',
      401,
    );
  });

  it('the authorize error page shows the refused redirect_uri, escaped, and the registered value it nearly matches', async () => {
    const refused = 'https://a.example/cb';
    const res = await t.app.inject(`/oauth/authorize?response_type=code&client_id=${appA.app.id}&redirect_uri=${encodeURIComponent(refused)}`);
    expect(res.statusCode).toBe(400);
    expect(res.headers.location).toBeUndefined();
    expect(res.body).toContain(ERROR_REASONS.redirect_uri_not_registered.en.replace(/'/g, '&#39;'));
    expect(res.body).toContain(`<code class="uri">${refused}</code>`);
    expect(res.body).toContain('<code class="uri">https://a.example/cb/</code>');
    expect(res.body).toContain('trailing slash');

    const hostile = 'https://a.example/"><script>alert(1)</script>';
    const escaped = await t.app.inject({ url: `/oauth/authorize?client_id=${appA.app.id}&redirect_uri=${encodeURIComponent(hostile)}`, headers: { 'accept-language': 'zh-CN' } });
    expect(escaped.statusCode).toBe(400);
    expect(escaped.body).not.toContain('<script>alert(1)');
    expect(escaped.body).toContain('&lt;script&gt;');
    expect(escaped.body).toContain(ERROR_REASONS.redirect_uri_not_registered['zh-CN']);

    // The provider-start door refuses the same way.
    const start = await t.app.inject(`/oauth/idp/start?client_id=${appA.app.id}&redirect_uri=${encodeURIComponent('http://localhost:8080/cb')}`);
    expect(start.statusCode).toBe(400);
    expect(start.body).toContain('<code class="uri">http://localhost:8080/cb</code>');
    expect(start.body).toContain('<code class="uri">http://127.0.0.1:8080/cb</code>');

    const unknown = await t.app.inject('/oauth/authorize?response_type=code&client_id=app_missing&redirect_uri=https%3A%2F%2Fa.example%2Fcb');
    expect(unknown.statusCode).toBe(400);
    expect(unknown.body).toContain('No app has this client_id');
  });
});

describe('developer feedback in production', () => {
  let t: TestApp;
  let appA: TestClient;

  beforeAll(async () => {
    t = await buildTestApp({ env: { NODE_ENV: 'production', BASE_URL: 'https://auth.test' } });
    appA = await makeClient(t, { redirectUris: ['https://a.example/cb/'] });
  });
  afterAll(async () => t.close());

  it('keeps the generic texts, and logs the reason', async () => {
    const res = await exchangeCode(t.app, appA, 'ac_never_issued', pkcePair().verifier);
    expect(res.json()).toEqual({ error: 'invalid_grant', error_description: GENERIC_GRANT });
    expect((await refresh(t.app, appA, 'rt_never_issued')).json()).toEqual({ error: 'invalid_grant', error_description: GENERIC_GRANT });
    expect(t.logs.some((line) => line.includes('"detail":"code_unknown"'))).toBe(true);
  });

  it('the authorize error page echoes the refused redirect_uri with the rule, but never the registered ones', async () => {
    const res = await t.app.inject(`/oauth/authorize?response_type=code&client_id=${appA.app.id}&redirect_uri=${encodeURIComponent('https://a.example/cb')}`);
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('The redirect_uri is not registered for this application.');
    expect(res.body).toContain('<code class="uri">https://a.example/cb</code>');
    expect(res.body).toContain('exactly, character for character');
    expect(res.body).not.toContain('https://a.example/cb/');
  });
});
