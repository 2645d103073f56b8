import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeJwt } from 'jose';
import type { TestApp } from '../helpers/app.js';
import { Browser, exchangeCode, makeClient, refresh, relative, tokenRequest, type TestClient } from '../helpers/oauth-flows.js';
import { listeningTestApp } from '../helpers/processes.js';
import { findApp, saveApp } from '../../src/storage/repos/apps.js';

/**
 * Resource indicators (RFC 8707, docs/reference/oauth.md#resource-indicators-rfc-8707) with `oauth4webapi`,
 * unmodified, against a listening server: `resource` at authorize, PAR and token narrows `aud`; the token
 * request stays within what was authorized; a token for another API is refused by Gatehouse's own
 * endpoints, whose 401 names their protected-resource metadata (RFC 9728).
 */

const CALLBACK = 'https://web.resource.test/callback';
const ORDERS = 'https://orders.api.test/';
const BILLING = 'https://billing.api.test/v1';
const UNDECLARED = 'https://elsewhere.api.test/';

async function callbackOf(browser: Browser, url: URL): Promise<URL> {
  let res = await browser.get(relative(url.href));
  for (let i = 0; i < 5; i++) {
    const location = String(res.headers.location ?? '');
    if (location.startsWith(CALLBACK)) return new URL(location);
    const path = relative(location);
    if (path.startsWith('/consent')) {
      const allowed = await browser.submit(path, { action: 'allow' });
      res = await browser.get(String(allowed.headers.location));
    } else if (path.startsWith('/oauth/authorize')) res = await browser.get(path);
    else throw new Error(`authorize stopped at ${res.statusCode} ${location} ${res.body.slice(0, 200)}`);
  }
  throw new Error('authorize did not reach the callback');
}

describe('resource indicators with oauth4webapi', () => {
  let t: TestApp;
  let base: string;
  let client: TestClient;
  let as: oauth.AuthorizationServer;
  let oc: oauth.Client;
  const options = { [oauth.allowInsecureRequests]: true } as const;

  beforeAll(async () => {
    ({ t, base } = await listeningTestApp());
    client = await makeClient(t, { name: 'Resource web app', type: 'confidential', redirectUris: [CALLBACK], resourceUris: [ORDERS, BILLING] });
    oc = { client_id: client.app.id };
    const issuer = new URL(base);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, options));
  });
  afterAll(async () => t?.close());

  /** Signs a new user in through /oauth/authorize (or PAR) naming `resources`; the callback's parameters and the verifier. */
  async function authorized(resources: string[], via: 'query' | 'par' = 'query') {
    const verifier = oauth.generateRandomCodeVerifier();
    const request = new URLSearchParams({
      client_id: oc.client_id, redirect_uri: CALLBACK, response_type: 'code', scope: 'openid email', state: 's1',
      code_challenge: await oauth.calculatePKCECodeChallenge(verifier), code_challenge_method: 'S256',
    });
    for (const resource of resources) request.append('resource', resource);
    const url = new URL(as.authorization_endpoint!);
    if (via === 'par') {
      const pushed = await oauth.processPushedAuthorizationResponse(as, oc, await oauth.pushedAuthorizationRequest(as, oc, oauth.ClientSecretPost(client.secret!), request, options));
      url.search = new URLSearchParams({ client_id: oc.client_id, request_uri: pushed.request_uri }).toString();
    } else url.search = request.toString();
    const browser = new Browser(t.app);
    await browser.register();
    return { params: oauth.validateAuthResponse(as, oc, await callbackOf(browser, url), 's1'), verifier };
  }

  const codeGrant = async (params: URLSearchParams, verifier: string, resources: string[] = []) => {
    const extra = new URLSearchParams();
    for (const resource of resources) extra.append('resource', resource);
    return oauth.processAuthorizationCodeResponse(
      as, oc,
      await oauth.authorizationCodeGrantRequest(as, oc, oauth.ClientSecretPost(client.secret!), params, CALLBACK, verifier, { ...options, additionalParameters: extra }),
    );
  };

  it('narrows aud to the resources authorized, then to the one asked at the token endpoint; refresh stays within them', async () => {
    const { params, verifier } = await authorized([ORDERS, BILLING]);
    const tokens = await codeGrant(params, verifier, [ORDERS]);
    expect(decodeJwt(tokens.access_token)).toMatchObject({ aud: ORDERS, client_id: client.app.id });
    expect(tokens.id_token).toBeTruthy();
    const grant = await t.db.selectFrom('grants').select('resources').where('user_id', '=', decodeJwt(tokens.access_token).sub!).executeTakeFirstOrThrow();
    expect(grant.resources).toBe(`${ORDERS} ${BILLING}`);

    const billing = await oauth.processRefreshTokenResponse(as, oc, await oauth.refreshTokenGrantRequest(as, oc, oauth.ClientSecretPost(client.secret!), tokens.refresh_token!, { ...options, additionalParameters: { resource: BILLING } }));
    expect(decodeJwt(billing.access_token).aud).toBe(BILLING);
    const both = await oauth.processRefreshTokenResponse(as, oc, await oauth.refreshTokenGrantRequest(as, oc, oauth.ClientSecretPost(client.secret!), billing.refresh_token!, options));
    expect(decodeJwt(both.access_token).aud).toEqual([ORDERS, BILLING]);

    // RFC 8707 §2.2: a refresh cannot widen to a resource the grant was not authorized for.
    const widened = await refresh(t.app, client, both.refresh_token!, { resource: UNDECLARED });
    expect(widened.statusCode).toBe(400);
    expect(widened.json()).toMatchObject({ error: 'invalid_target' });

    // The developer withdraws an API: the grant can no longer mint tokens for it.
    const app = (await findApp(t.db, client.app.id))!;
    await saveApp(t.db, { ...app, resourceUris: [ORDERS] });
    try {
      const withdrawn = await refresh(t.app, client, both.refresh_token!, { resource: BILLING });
      expect(withdrawn.json()).toMatchObject({ error: 'invalid_target' });
      const remaining = await refresh(t.app, client, both.refresh_token!, { resource: ORDERS });
      expect(decodeJwt(remaining.json().access_token).aud).toBe(ORDERS);
    } finally {
      await saveApp(t.db, app);
    }
  });

  it('through PAR: the pushed resources are the authorized ones', async () => {
    const { params, verifier } = await authorized([BILLING], 'par');
    const tokens = await codeGrant(params, verifier);
    expect(decodeJwt(tokens.access_token).aud).toBe(BILLING);
  });

  it('a resource at the token endpoint that the authorization did not name is invalid_target, and the code still redeems', async () => {
    const { params, verifier } = await authorized([ORDERS]);
    const code = params.get('code')!;
    const outside = await exchangeCode(t.app, client, code, verifier, CALLBACK, { resource: BILLING });
    expect(outside.statusCode).toBe(400);
    expect(outside.json()).toMatchObject({ error: 'invalid_target' });
    // Not burned: the client can correct its request.
    const ok = await exchangeCode(t.app, client, code, verifier, CALLBACK, { resource: ORDERS });
    expect(ok.statusCode).toBe(200);

    // A code authorized for no resource cannot be turned into a token for one.
    const plain = await authorized([]);
    const widened = await exchangeCode(t.app, client, plain.params.get('code')!, plain.verifier, CALLBACK, { resource: ORDERS });
    expect(widened.json()).toMatchObject({ error: 'invalid_target' });
  });

  it('a resource the app did not declare is refused at authorize (redirected invalid_target) and at PAR', async () => {
    const browser = new Browser(t.app);
    await browser.register();
    const url = `/oauth/authorize?${new URLSearchParams({ client_id: oc.client_id, redirect_uri: CALLBACK, response_type: 'code', scope: 'openid', state: 'x', resource: UNDECLARED, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' })}`;
    const res = await browser.get(url);
    expect(res.statusCode).toBe(302);
    const back = new URL(String(res.headers.location));
    expect(back.origin + back.pathname).toBe(CALLBACK);
    expect(back.searchParams.get('error')).toBe('invalid_target');
    expect(back.searchParams.get('code')).toBeNull();

    for (const resource of [UNDECLARED, 'https://orders.api.test/#frag', 'not a uri']) {
      const pushed = await t.app.inject({
        method: 'POST', url: '/oauth/par', headers: { 'content-type': 'application/x-www-form-urlencoded' },
        payload: new URLSearchParams({ client_id: oc.client_id, client_secret: client.secret!, redirect_uri: CALLBACK, response_type: 'code', scope: 'openid', resource, code_challenge: 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM', code_challenge_method: 'S256' }).toString(),
      });
      expect(pushed.statusCode).toBe(400);
      expect(pushed.json()).toMatchObject({ error: 'invalid_target' });
    }
  });

  it("a token narrowed to another API is refused at Gatehouse's own endpoints; one that also names Gatehouse is accepted", async () => {
    const { params, verifier } = await authorized([ORDERS, base]);
    const tokens = await codeGrant(params, verifier, [ORDERS]);
    const sub = decodeJwt(tokens.access_token).sub!;
    for (const path of ['/oauth/userinfo', `/v1/profile/${sub}`]) {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${tokens.access_token}`, 'x-client-id': oc.client_id } });
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toContain(`resource_metadata="${base}/.well-known/oauth-protected-resource"`);
    }
    // Its client may still introspect and revoke it.
    const introspected = await tokenIntrospection(tokens.access_token);
    expect(introspected).toMatchObject({ active: true, aud: ORDERS, sub });

    const ours = await oauth.processRefreshTokenResponse(as, oc, await oauth.refreshTokenGrantRequest(as, oc, oauth.ClientSecretPost(client.secret!), tokens.refresh_token!, { ...options, additionalParameters: [['resource', ORDERS], ['resource', base]] }));
    expect(decodeJwt(ours.access_token).aud).toEqual([ORDERS, base]);
    const info = await oauth.processUserInfoResponse(as, oc, decodeJwt(ours.access_token).sub!, await oauth.userInfoRequest(as, oc, ours.access_token, options));
    expect(info.email).toBeTruthy();
    const profile = await fetch(`${base}/v1/profile/${sub}`, { headers: { authorization: `Bearer ${ours.access_token}`, 'x-client-id': oc.client_id } });
    expect(profile.status).not.toBe(401);
  });

  it('serves its protected-resource metadata (RFC 9728) naming itself as the authorization server', async () => {
    const res = await fetch(`${base}/.well-known/oauth-protected-resource`);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ resource: base, authorization_servers: [base] });
    const unauthenticated = await fetch(`${base}/oauth/userinfo`);
    expect(unauthenticated.status).toBe(401);
    expect(unauthenticated.headers.get('www-authenticate')).toMatch(/^Bearer .*resource_metadata="/);
  });

  async function tokenIntrospection(token: string): Promise<Record<string, unknown>> {
    const res = await t.app.inject({
      method: 'POST', url: '/oauth/introspect', headers: { 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ token, client_id: oc.client_id, client_secret: client.secret! }).toString(),
    });
    return res.json();
  }

  it('a repeated parameter other than resource is still refused at the token endpoint', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/oauth/token', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'grant_type=refresh_token&grant_type=refresh_token' });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ error: 'invalid_request' });
    expect((await tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_x', client_id: oc.client_id, client_secret: client.secret! })).json()).toMatchObject({ error: 'invalid_grant' });
  });
});
