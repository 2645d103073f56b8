import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { Browser, relative } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';

/**
 * Dynamic client registration (docs/reference/oauth.md#dynamic-client-registration-rfc-7591) with `oauth4webapi`,
 * unmodified, against a listening server: discovery names the endpoint, the client registers itself
 * with a developer's initial access token, then signs a person in with the code flow and PKCE.
 */

const CALLBACK = 'http://127.0.0.1:53682/callback';

describe('dynamic client registration with oauth4webapi', () => {
  let t: TestApp;
  let as: oauth.AuthorizationServer;

  beforeAll(async () => {
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({ env: { BASE_URL: base, DYNAMIC_REGISTRATION: '1' } });
    await t.app.listen({ port, host: '127.0.0.1' });
    const issuer = new URL(base);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }));
  });
  afterAll(async () => t?.close());

  it('registers a public client and signs someone in with it', async () => {
    expect(as.registration_endpoint).toBe(`${t.config.baseUrl}/oauth/register`);
    const developer = await createDeveloperViaApi(t);
    const issued = await t.app.inject({ method: 'POST', url: '/v1/dev/initial-access-tokens', headers: bearer(developer.apiKey), payload: { name: 'CLI' } });
    const registered = await oauth.processDynamicClientRegistrationResponse(
      await oauth.dynamicClientRegistrationRequest(
        as,
        { client_name: 'Agent CLI', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'] },
        { initialAccessToken: issued.json().token, [oauth.allowInsecureRequests]: true },
      ),
    );
    const client: oauth.Client = { client_id: registered.client_id };

    const verifier = oauth.generateRandomCodeVerifier();
    const url = new URL(as.authorization_endpoint!);
    url.search = new URLSearchParams({
      client_id: client.client_id, redirect_uri: CALLBACK, response_type: 'code', scope: 'openid profile email', state: 's1',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    }).toString();
    const browser = new Browser(t.app);
    await browser.register();
    let res = await browser.get(relative(url.href));
    if (relative(String(res.headers.location)).startsWith('/consent')) {
      const allowed = await browser.submit(relative(String(res.headers.location)), { action: 'allow' });
      res = await browser.get(String(allowed.headers.location));
    }
    const callback = new URL(String(res.headers.location));
    expect(callback.origin + callback.pathname).toBe(CALLBACK);
    const params = oauth.validateAuthResponse(as, client, callback, 's1');
    const tokens = await oauth.processAuthorizationCodeResponse(
      as, client, await oauth.authorizationCodeGrantRequest(as, client, oauth.None(), params, CALLBACK, verifier, { [oauth.allowInsecureRequests]: true }),
    );
    expect(decodeJwt(tokens.access_token).client_id).toBe(registered.client_id);
    expect(tokens.refresh_token).toBeTruthy();
    const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, { [oauth.allowInsecureRequests]: true }));
    expect(refreshed.access_token).toBeTruthy();
  });
});
