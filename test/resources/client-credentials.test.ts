import * as oauth from 'oauth4webapi';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import type { TestApp } from '../helpers/app.js';
import { makeClient, signedInWithTokens, tokenRequest, type TestClient } from '../helpers/oauth-flows.js';
import { listeningTestApp } from '../helpers/processes.js';
import { findApp, saveApp, deleteApp } from '../../src/storage/repos/apps.js';

/**
 * grant_type=client_credentials (docs/reference/oauth.md#client-credentials) with `oauth4webapi`, unmodified:
 * tokens for a confidential app itself (`sub` = client id, `aud` = its declared APIs, no refresh or ID
 * token, DPoP-bindable), and every way to get or use one that must fail: a public app, an app without
 * the switch, a scope not allowed, an undeclared resource, the token at Gatehouse's own user endpoints,
 * and its end by revocation, the switch turned off, the app disabled or deleted.
 */

const ORDERS = 'https://orders.api.test/';
const BILLING = 'https://billing.api.test/';

describe('client credentials with oauth4webapi', () => {
  let t: TestApp;
  let base: string;
  let backend: TestClient;
  let as: oauth.AuthorizationServer;
  const options = { [oauth.allowInsecureRequests]: true } as const;

  beforeAll(async () => {
    ({ t, base } = await listeningTestApp());
    backend = await makeClient(t, {
      name: 'Backend', type: 'confidential', resourceUris: [ORDERS, BILLING],
      clientCredentials: { enabled: true, scopes: ['orders:read', 'orders:write'], notBefore: null },
    });
    const issuer = new URL(base);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, options));
  });
  afterAll(async () => t?.close());

  const clientOf = (c: TestClient): oauth.Client => ({ client_id: c.app.id });
  const grant = async (c: TestClient, parameters: Record<string, string> | string[][], extra: { DPoP?: oauth.DPoPHandle } = {}) =>
    oauth.processClientCredentialsResponse(as, clientOf(c), await oauth.clientCredentialsGrantRequest(as, clientOf(c), oauth.ClientSecretBasic(c.secret!), new URLSearchParams(parameters), { ...options, ...extra }));
  const introspect = async (c: TestClient, token: string) =>
    (await t.app.inject({ method: 'POST', url: '/oauth/introspect', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ token, client_id: c.app.id, client_secret: c.secret! }).toString() })).json() as Record<string, unknown>;

  it('discovery lists the grant; a token for the app itself: sub = client id, aud = the resource, no refresh or ID token', async () => {
    expect(as.grant_types_supported).toContain('client_credentials');
    const tokens = await grant(backend, { scope: 'orders:read', resource: ORDERS });
    expect(tokens.token_type).toBe('bearer');
    expect(tokens.refresh_token).toBeUndefined();
    expect(tokens.id_token).toBeUndefined();
    const claims = decodeJwt(tokens.access_token);
    expect(claims).toMatchObject({ sub: backend.app.id, client_id: backend.app.id, aud: ORDERS, scope: 'orders:read', iss: base });
    expect(claims.sid).toBeUndefined();
    expect(await introspect(backend, tokens.access_token)).toMatchObject({ active: true, sub: backend.app.id, aud: ORDERS, scope: 'orders:read', token_type: 'Bearer' });

    // Without scope or resource: every allowed scope, every declared API.
    const all = decodeJwt((await grant(backend, {})).access_token);
    expect(all).toMatchObject({ aud: [ORDERS, BILLING], scope: 'orders:read orders:write' });
  });

  it('binds the token to the key of a DPoP proof', async () => {
    const keyPair = await oauth.generateKeyPair('ES256');
    const DPoP = oauth.DPoP(clientOf(backend), keyPair);
    let tokens: oauth.TokenEndpointResponse;
    try {
      tokens = await grant(backend, { resource: BILLING }, { DPoP });
    } catch (error) {
      if (!oauth.isDPoPNonceError(error)) throw error;
      tokens = await grant(backend, { resource: BILLING }, { DPoP });
    }
    expect(tokens.token_type).toBe('dpop');
    expect(decodeJwt(tokens.access_token).cnf).toEqual({ jkt: await calculateJwkThumbprint(await exportJWK(keyPair.publicKey)) });
  });

  it('refuses a public app, an app without the switch, a scope not allowed, and an undeclared resource', async () => {
    const spa = await makeClient(t, { name: 'SPA', resourceUris: [ORDERS], clientCredentials: { enabled: true, scopes: ['orders:read'], notBefore: null } });
    const asPublic = await tokenRequest(t.app, { grant_type: 'client_credentials', client_id: spa.app.id, resource: ORDERS });
    expect(asPublic.statusCode).toBe(400);
    expect(asPublic.json()).toMatchObject({ error: 'unauthorized_client' });

    const off = await makeClient(t, { name: 'No switch', type: 'confidential', resourceUris: [ORDERS] });
    await expect(grant(off, { resource: ORDERS })).rejects.toMatchObject({ error: 'unauthorized_client' });

    await expect(grant(backend, { scope: 'orders:delete' })).rejects.toMatchObject({ error: 'invalid_scope' });
    await expect(grant(backend, { scope: 'openid' })).rejects.toMatchObject({ error: 'invalid_scope' });
    await expect(grant(backend, { resource: 'https://elsewhere.api.test/' })).rejects.toMatchObject({ error: 'invalid_target' });
    // Gatehouse's own endpoints serve users: not a resource for a client on its own.
    await expect(grant(backend, { resource: base })).rejects.toMatchObject({ error: 'invalid_target' });
    await expect(grant(backend, [['resource', ORDERS], ['resource', 'https://elsewhere.api.test/']])).rejects.toMatchObject({ error: 'invalid_target' });

    const wrongSecret = await tokenRequest(t.app, { grant_type: 'client_credentials', client_id: backend.app.id, client_secret: 'cs_wrong' });
    expect(wrongSecret.statusCode).toBe(401);
    expect(wrongSecret.json()).toMatchObject({ error: 'invalid_client' });
  });

  it("never passes as a user: refused at userinfo, /v1/profile and /v1/auth doors, whatever its subject", async () => {
    const token = (await grant(backend, {})).access_token;
    for (const path of ['/oauth/userinfo', `/v1/profile/${backend.app.id}`, '/v1/auth/sessions', '/v1/auth/account/export']) {
      const res = await fetch(`${base}${path}`, { headers: { authorization: `Bearer ${token}`, 'x-client-id': backend.app.id } });
      expect(res.status, path).toBe(401);
      expect(res.headers.get('www-authenticate'), path).toContain('resource_metadata=');
    }
  });

  it('revocation ends the app\'s client tokens issued so far; the switch off, a disabled or deleted app end them too', async () => {
    const first = (await grant(backend, {})).access_token;
    const revoked = await t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ token: first, client_id: backend.app.id, client_secret: backend.secret! }).toString() });
    expect(revoked.statusCode).toBe(200);
    expect(await introspect(backend, first)).toEqual({ active: false });
    t.clock.advance(1);
    const second = (await grant(backend, {})).access_token;
    expect(await introspect(backend, second)).toMatchObject({ active: true });

    // Another client can neither see nor revoke it.
    const other = await makeClient(t, { name: 'Other', type: 'confidential' });
    expect(await introspect(other, second)).toEqual({ active: false });
    await t.app.inject({ method: 'POST', url: '/oauth/revoke', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams({ token: second, client_id: other.app.id, client_secret: other.secret! }).toString() });
    expect(await introspect(backend, second)).toMatchObject({ active: true });

    const app = (await findApp(t.db, backend.app.id))!;
    await saveApp(t.db, { ...app, clientCredentials: { ...app.clientCredentials, enabled: false } });
    expect(await introspect(backend, second)).toEqual({ active: false });
    await expect(grant(backend, {})).rejects.toMatchObject({ error: 'unauthorized_client' });
    // A disabled app cannot even authenticate to introspect: the check itself says no.
    await saveApp(t.db, { ...app, disabled: true });
    expect(await t.app.tokens.checkClientToken(second)).toBeNull();
    await saveApp(t.db, app);
    expect(await introspect(backend, second)).toMatchObject({ active: true });

    const doomed = await makeClient(t, { name: 'Doomed', type: 'confidential', resourceUris: [ORDERS], clientCredentials: { enabled: true, scopes: [], notBefore: null } });
    const orphan = (await grant(doomed, {})).access_token;
    await deleteApp(t.db, doomed.app.id, t.clock.now());
    expect(await t.app.tokens.checkClientToken(orphan)).toBeNull();
  });

  it("a user's token is not a client token: introspection keeps its user and grant", async () => {
    const userApp = await makeClient(t, { name: 'Web', type: 'confidential', resourceUris: [ORDERS], clientCredentials: { enabled: true, scopes: [], notBefore: null } });
    const { tokens } = await signedInWithTokens(t, userApp);
    expect(await t.app.tokens.checkClientToken(tokens.access_token)).toBeNull();
    expect(await introspect(userApp, tokens.access_token)).toMatchObject({ active: true, sub: decodeJwt(tokens.access_token).sub, sid: expect.any(String) });
  });
});
