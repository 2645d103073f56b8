import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import type { TestApp } from '../helpers/app.js';
import { Browser, followToCallback, makeClient, type TestClient } from '../helpers/oauth-flows.js';
import { listeningTestApp } from '../helpers/processes.js';

/**
 * DPoP (docs/reference/oauth.md "DPoP") with `oauth4webapi`, unmodified, against a listening server: the
 * code flow with server nonces (the client retries on `use_dpop_nonce`), a DPoP-bound access token
 * (`token_type: DPoP`, `cnf.jkt`), userinfo with the DPoP scheme, and refreshes bound to the key.
 */

const CALLBACK = 'https://spa.dpop.test/callback';

/** Runs a request once more when the server asked for a nonce (the handle has stored it from DPoP-Nonce). */
async function withNonceRetry<T>(run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (oauth.isDPoPNonceError(error)) return run();
    throw error;
  }
}

const callbackOf = (browser: Browser, url: URL): Promise<URL> => followToCallback(browser, url.href, CALLBACK);

describe('DPoP with oauth4webapi (code flow, nonces, userinfo, refresh)', () => {
  let t: TestApp;
  let base: string;
  let client: TestClient;
  let as: oauth.AuthorizationServer;

  beforeAll(async () => {
    ({ t, base } = await listeningTestApp());
    client = await makeClient(t, { name: 'DPoP SPA', redirectUris: [CALLBACK] });
    const issuer = new URL(base);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }));
  });
  afterAll(async () => t?.close());

  async function signIn(keyPair: CryptoKeyPair, options: { bindCode?: boolean } = {}) {
    const oc: oauth.Client = { client_id: client.app.id };
    const dpop = oauth.DPoP(oc, keyPair);
    const verifier = oauth.generateRandomCodeVerifier();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: oc.client_id, redirect_uri: CALLBACK, response_type: 'code', scope: 'openid profile email', state: 's1',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
      ...(options.bindCode ? { dpop_jkt: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey)) } : {}),
    }).toString();
    const browser = new Browser(t.app);
    await browser.register();
    const params = oauth.validateAuthResponse(as, oc, await callbackOf(browser, url), 's1');
    const tokens = await withNonceRetry(async () =>
      oauth.processAuthorizationCodeResponse(as, oc, await oauth.authorizationCodeGrantRequest(as, oc, oauth.None(), params, CALLBACK, verifier, { DPoP: dpop, [oauth.allowInsecureRequests]: true })),
    );
    return { oc, dpop, tokens };
  }

  it('binds the access token and the refresh token to the key; userinfo and refresh need it', async () => {
    expect(as.dpop_signing_alg_values_supported).toContain('ES256');
    const keyPair = await oauth.generateKeyPair('ES256');
    const { oc, dpop, tokens } = await signIn(keyPair);
    expect(tokens.token_type).toBe('dpop');
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt });
    const grant = await t.db.selectFrom('grants').select('dpop_jkt').where('user_id', '=', decodeJwt(tokens.access_token).sub!).executeTakeFirstOrThrow();
    expect(grant.dpop_jkt).toBe(jkt);

    const sub = decodeJwt(tokens.access_token).sub!;
    const info = await withNonceRetry(async () =>
      oauth.processUserInfoResponse(as, oc, sub, await oauth.userInfoRequest(as, oc, tokens.access_token, { DPoP: dpop, [oauth.allowInsecureRequests]: true })),
    );
    expect(info.sub).toBe(sub);

    // The same token as Bearer is refused (RFC 9449 §7.2).
    const asBearer = await fetch(`${base}/oauth/userinfo`, { headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(asBearer.status).toBe(401);
    expect(asBearer.headers.get('www-authenticate')).toMatch(/^DPoP error="invalid_token"/);

    // Refresh with the key: a new bound token; the binding survives rotation.
    const refreshed = await withNonceRetry(async () =>
      oauth.processRefreshTokenResponse(as, oc, await oauth.refreshTokenGrantRequest(as, oc, oauth.None(), tokens.refresh_token!, { DPoP: dpop, [oauth.allowInsecureRequests]: true })),
    );
    expect(refreshed.token_type).toBe('dpop');
    expect(decodeJwt(refreshed.access_token).cnf).toEqual({ jkt });

    // Another key cannot use the rotated refresh token, and its attempt revokes nothing.
    const other = oauth.DPoP(oc, await oauth.generateKeyPair('ES256'));
    const stolen = () => oauth.refreshTokenGrantRequest(as, oc, oauth.None(), refreshed.refresh_token!, { DPoP: other, [oauth.allowInsecureRequests]: true });
    await expect(withNonceRetry(async () => oauth.processRefreshTokenResponse(as, oc, await stolen()))).rejects.toMatchObject({ error: 'invalid_dpop_proof' });
    const noProof = await fetch(`${base}/oauth/token`, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: refreshed.refresh_token!, client_id: oc.client_id }),
    });
    expect(noProof.status).toBe(400);
    expect(await noProof.json()).toMatchObject({ error: 'invalid_dpop_proof' });
    const again = await withNonceRetry(async () =>
      oauth.processRefreshTokenResponse(as, oc, await oauth.refreshTokenGrantRequest(as, oc, oauth.None(), refreshed.refresh_token!, { DPoP: dpop, [oauth.allowInsecureRequests]: true })),
    );
    expect(again.access_token).toBeTruthy();
  });

  it('a code bound with dpop_jkt redeems only with that key', async () => {
    const keyPair = await oauth.generateKeyPair('ES256');
    const { tokens } = await signIn(keyPair, { bindCode: true });
    expect(tokens.token_type).toBe('dpop');
  });
});
