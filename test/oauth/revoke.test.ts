import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient, refresh, signedInWithTokens, userinfo, type TestClient } from '../helpers/oauth-flows.js';

const form = (body: Record<string, string>) => new URLSearchParams(body).toString();

describe('POST /oauth/revoke (RFC 7009) and POST /oauth/introspect (RFC 7662)', () => {
  let t: TestApp;
  let appA: TestClient;
  let appB: TestClient;
  let appC: TestClient;

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeClient(t);
    appB = await makeClient(t, { redirectUris: ['https://b.example/cb'] });
    appC = await makeClient(t, { type: 'confidential', redirectUris: ['https://c.example/cb'] });
  });
  afterAll(async () => t.close());

  const post = (url: string, body: Record<string, string>, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url, headers: { 'content-type': 'application/x-www-form-urlencoded', ...headers }, payload: form(body) });

  it('revoking a refresh token ends its family; unknown tokens still get 200', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    const res = await post('/oauth/revoke', { token: tokens.refresh_token, token_type_hint: 'refresh_token', client_id: appA.app.id });
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    expect((await refresh(t.app, appA, tokens.refresh_token)).json().error).toBe('invalid_grant');
    expect((await userinfo(t.app, tokens.access_token)).statusCode).toBe(401);
    expect((await post('/oauth/revoke', { token: 'nonsense', client_id: appA.app.id })).statusCode).toBe(200);
    expect((await post('/oauth/revoke', { token: tokens.refresh_token, client_id: appA.app.id, token_type_hint: 'weird' })).statusCode).toBe(200);
  });

  it('revoking an access token ends its grant', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    expect((await post('/oauth/revoke', { token: tokens.access_token, client_id: appA.app.id })).statusCode).toBe(200);
    expect((await userinfo(t.app, tokens.access_token)).statusCode).toBe(401);
  });

  it('another client cannot revoke someone else’s token (ignored, 200)', async () => {
    const { tokens } = await signedInWithTokens(t, appA);
    expect((await post('/oauth/revoke', { token: tokens.refresh_token, client_id: appB.app.id })).statusCode).toBe(200);
    expect((await refresh(t.app, appA, tokens.refresh_token)).statusCode).toBe(200);
  });

  it('missing token → invalid_request; bad client auth → 401 invalid_client', async () => {
    expect((await post('/oauth/revoke', { client_id: appA.app.id })).json().error).toBe('invalid_request');
    const res = await post('/oauth/revoke', { token: 'x', client_id: appC.app.id, client_secret: 'wrong' });
    expect(res.statusCode).toBe(401);
    expect(res.json().error).toBe('invalid_client');
  });

  it('introspection: confidential apps see their own live tokens; everything else is inactive', async () => {
    const { tokens } = await signedInWithTokens(t, appC, { pkce: null });
    const auth = { authorization: `Basic ${Buffer.from(`${appC.app.id}:${appC.secret}`).toString('base64')}` };
    const at = await post('/oauth/introspect', { token: tokens.access_token }, auth);
    expect(at.statusCode).toBe(200);
    expect(at.json()).toMatchObject({ active: true, client_id: appC.app.id, token_type: 'Bearer', scope: 'email openid profile' });
    const rt = await post('/oauth/introspect', { token: tokens.refresh_token }, auth);
    expect(rt.json()).toMatchObject({ active: true, token_type: 'refresh_token' });
    expect((await post('/oauth/introspect', { token: 'garbage' }, auth)).json()).toEqual({ active: false });
    const other = await signedInWithTokens(t, appA);
    expect((await post('/oauth/introspect', { token: other.tokens.access_token }, auth)).json()).toEqual({ active: false });
    const pub = await post('/oauth/introspect', { token: other.tokens.access_token, client_id: appA.app.id });
    expect(pub.statusCode).toBe(401);
    await post('/oauth/revoke', { token: tokens.refresh_token }, auth);
    expect((await post('/oauth/introspect', { token: tokens.access_token }, auth)).json()).toEqual({ active: false });
  });
});
