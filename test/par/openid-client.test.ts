import * as oidc from 'openid-client';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { Browser, followToCallback, makeClient, type TestClient } from '../helpers/oauth-flows.js';
import { listeningTestApp } from '../helpers/processes.js';

/**
 * `openid-client` v6 as the app, unmodified, against a listening server with DPoP server nonces on
 * (docs/reference/oauth.md#pushed-authorization-requests-rfc-9126, docs/guides/dpop.md): PAR with a DPoP
 * proof (which binds the code), the code grant, userinfo and refreshes with the same key; an app that
 * requires both PAR and DPoP; a confidential app authenticating at PAR; another key refused.
 */

const CALLBACK = 'https://app.openid-client.test/callback';

describe('openid-client v6: PAR and DPoP', () => {
  let t: TestApp;
  let base: string;

  beforeAll(async () => {
    ({ t, base } = await listeningTestApp());
  });
  afterAll(async () => t?.close());

  const configFor = (client: TestClient) =>
    oidc.discovery(new URL(base), client.app.id, undefined, client.secret ? oidc.ClientSecretPost(client.secret) : oidc.None(), { execute: [oidc.allowInsecureRequests] });

  /** PAR (with the DPoP handle), the browser through sign-in and consent, then the code grant: what an app does. */
  async function signIn(client: TestClient, dpop: oidc.DPoPHandle) {
    const config = await configFor(client);
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const nonce = oidc.randomNonce();
    const url = await oidc.buildAuthorizationUrlWithPAR(
      config,
      { redirect_uri: CALLBACK, scope: 'openid profile email', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state, nonce },
      { DPoP: dpop },
    );
    // Only client_id and request_uri travel through the browser.
    expect([...url.searchParams.keys()].sort()).toEqual(['client_id', 'request_uri']);
    const browser = new Browser(t.app);
    await browser.register();
    const callback = await followToCallback(browser, url.href, CALLBACK);
    const tokens = await oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state, expectedNonce: nonce, idTokenExpected: true }, undefined, { DPoP: dpop });
    return { config, tokens };
  }

  it('binds the code, the access token and the refresh token to the key; userinfo and refresh need it', async () => {
    const client = await makeClient(t, { name: 'openid-client SPA', redirectUris: [CALLBACK] });
    const keyPair = await oidc.randomDPoPKeyPair('ES256');
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
    const { config, tokens } = await signIn(client, oidc.getDPoPHandle(await configFor(client), keyPair));
    const dpop = oidc.getDPoPHandle(config, keyPair);
    expect(config.serverMetadata().pushed_authorization_request_endpoint).toBe(`${base}/oauth/par`);
    expect(tokens.token_type).toBe('dpop');
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt });
    const sub = tokens.claims()!.sub;

    const info = await oidc.fetchUserInfo(config, tokens.access_token, sub, { DPoP: dpop });
    expect(info.sub).toBe(sub);

    const refreshed = await oidc.refreshTokenGrant(config, tokens.refresh_token!, undefined, { DPoP: dpop });
    expect(refreshed.token_type).toBe('dpop');
    expect(decodeJwt(refreshed.access_token).cnf).toEqual({ jkt });

    // Another key, and no key at all, cannot use the rotated refresh token; its owner still can.
    const thief = oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair('ES256'));
    await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP: thief })).rejects.toMatchObject({ error: 'invalid_dpop_proof' });
    await expect(oidc.refreshTokenGrant(config, refreshed.refresh_token!)).rejects.toMatchObject({ error: 'invalid_dpop_proof' });
    const again = await oidc.refreshTokenGrant(config, refreshed.refresh_token!, undefined, { DPoP: dpop });
    expect(again.access_token).toBeTruthy();
  });

  it('a code pushed with one key does not redeem with another (RFC 9449 §10.1)', async () => {
    const client = await makeClient(t, { name: 'openid-client SPA 2', redirectUris: [CALLBACK] });
    const config = await configFor(client);
    const verifier = oidc.randomPKCECodeVerifier();
    const state = oidc.randomState();
    const url = await oidc.buildAuthorizationUrlWithPAR(
      config,
      { redirect_uri: CALLBACK, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256', state },
      { DPoP: oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair('ES256')) },
    );
    const browser = new Browser(t.app);
    await browser.register();
    const callback = await followToCallback(browser, url.href, CALLBACK);
    const thief = oidc.getDPoPHandle(config, await oidc.randomDPoPKeyPair('ES256'));
    await expect(oidc.authorizationCodeGrant(config, callback, { pkceCodeVerifier: verifier, expectedState: state }, undefined, { DPoP: thief })).rejects.toMatchObject({ error: 'invalid_dpop_proof' });
  });

  it('an app that requires PAR and DPoP: works through openid-client, refuses a plain authorization URL', async () => {
    const strict = await makeClient(t, { name: 'FAPI app', type: 'confidential', redirectUris: [CALLBACK], oauth: { dpopBoundAccessTokens: true, requirePushedAuthorizationRequests: true, deviceAuthorizationGrant: false } });
    const keyPair = await oidc.randomDPoPKeyPair('ES256');
    const { config, tokens } = await signIn(strict, oidc.getDPoPHandle(await configFor(strict), keyPair));
    expect(tokens.token_type).toBe('dpop');
    expect(tokens.claims()!.aud).toBe(strict.app.id);

    const plain = oidc.buildAuthorizationUrl(config, { redirect_uri: CALLBACK, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()), code_challenge_method: 'S256', state: 's1' });
    const refused = await new Browser(t.app).get(plain.href);
    expect(new URL(String(refused.headers.location)).searchParams.get('error')).toBe('invalid_request');

    // The app requires DPoP: a refresh without a proof is refused.
    await expect(oidc.refreshTokenGrant(config, tokens.refresh_token!)).rejects.toMatchObject({ error: 'invalid_dpop_proof' });
  });

  it('a confidential app with a wrong secret cannot push', async () => {
    const backend = await makeClient(t, { name: 'Backend', type: 'confidential', redirectUris: [CALLBACK] });
    const config = await configFor({ ...backend, secret: 'cs_wrong' });
    const params = { redirect_uri: CALLBACK, scope: 'openid', code_challenge: await oidc.calculatePKCECodeChallenge(oidc.randomPKCECodeVerifier()), code_challenge_method: 'S256' };
    // A 401 with a Basic challenge, which openid-client reports as such.
    await expect(oidc.buildAuthorizationUrlWithPAR(config, params)).rejects.toMatchObject({ status: 401, code: 'OAUTH_WWW_AUTHENTICATE_CHALLENGE' });
  });
});
