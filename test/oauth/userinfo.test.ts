import { createPublicKey } from 'node:crypto';
import { base64url, decodeJwt, decodeProtectedHeader, exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient, signedInWithTokens, userinfo, type TestClient } from '../helpers/oauth-flows.js';

describe('GET|POST /oauth/userinfo and access-token validation (docs/security/checklist.md#access-tokens)', () => {
  let t: TestApp;
  let appA: TestClient;
  let tokens: Awaited<ReturnType<typeof signedInWithTokens>>['tokens'];
  let email: string;

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeClient(t, { allowedOrigins: ['https://spa.example'] });
    const s = await signedInWithTokens(t, appA);
    tokens = s.tokens;
    email = s.user.email;
  });
  afterAll(async () => t.close());

  const expect401 = (res: { statusCode: number; headers: Record<string, unknown> }) => {
    expect(res.statusCode).toBe(401);
    expect(String(res.headers['www-authenticate'])).toMatch(/^Bearer/);
  };

  it('returns sub, email, email_verified and name by scope, with no-store', async () => {
    const res = await userinfo(t.app, tokens.access_token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toEqual({ sub: decodeJwt(tokens.access_token).sub, email, email_verified: false, name: 'Alice Example' });
    const post = await t.app.inject({ method: 'POST', url: '/oauth/userinfo', headers: { authorization: `Bearer ${tokens.access_token}` } });
    expect(post.json()).toEqual(body);
  });

  it('omits claims whose scope was not granted; without openid → 403 insufficient_scope', async () => {
    const only = await signedInWithTokens(t, appA, { scope: 'openid' });
    expect(Object.keys((await userinfo(t.app, only.tokens.access_token)).json())).toEqual(['sub']);
    const noOpenid = await signedInWithTokens(t, appA, { scope: 'profile' });
    const res = await userinfo(t.app, noOpenid.tokens.access_token);
    expect(res.statusCode).toBe(403);
    expect(res.json().error).toBe('insufficient_scope');
    expect(String(res.headers['www-authenticate'])).toContain('insufficient_scope');
  });

  it('item 32: the access token profile (RFC 9068)', async () => {
    const header = decodeProtectedHeader(tokens.access_token);
    expect(header).toMatchObject({ typ: 'at+jwt', alg: 'ES256' });
    const jwks = (await t.app.keys.jwks()).keys.map((k) => k.kid);
    expect(jwks).toContain(header.kid);
    const claims = decodeJwt(tokens.access_token);
    for (const c of ['iss', 'exp', 'aud', 'sub', 'client_id', 'iat', 'jti', 'sid', 'scope']) expect(claims).toHaveProperty(c);
    expect(claims.exp! - claims.iat!).toBeLessThanOrEqual(900);
    expect(claims.aud).toBe(appA.app.id);
  });

  it('item 41a–c: missing header, Basic, query token (a form-body token on POST is RFC 6750 §2.2: test/oauth/oidc-conformance.test.ts)', async () => {
    const none = await t.app.inject('/oauth/userinfo');
    expect401(none);
    expect(String(none.headers['www-authenticate'])).not.toContain('error=');
    expect401(await t.app.inject({ url: '/oauth/userinfo', headers: { authorization: 'Basic YTpi' } }));
    expect401(await t.app.inject(`/oauth/userinfo?access_token=${tokens.access_token}`));
    expect401(await t.app.inject({ method: 'POST', url: `/oauth/userinfo?access_token=${tokens.access_token}` }));
  });

  it('item 33: alg none in every spelling → 401 invalid_token', async () => {
    const [, payload] = tokens.access_token.split('.');
    for (const alg of ['none', 'None', 'NONE', 'nOnE']) {
      const header = base64url.encode(JSON.stringify({ alg, typ: 'at+jwt', kid: decodeProtectedHeader(tokens.access_token).kid }));
      const res = await userinfo(t.app, `${header}.${payload}.`);
      expect401(res);
      expect(String(res.headers['www-authenticate'])).toContain('error="invalid_token"');
    }
  });

  it('item 34: HS256 confusion with our public key, and an attacker ES256 key reusing our kid → 401', async () => {
    const claims = decodeJwt(tokens.access_token);
    const kid = decodeProtectedHeader(tokens.access_token).kid!;
    const jwk = (await t.app.keys.jwks()).keys.find((k) => k.kid === kid)!;
    const pem = createPublicKey({ key: jwk as never, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
    const der = createPublicKey({ key: jwk as never, format: 'jwk' }).export({ type: 'spki', format: 'der' });
    for (const secret of [Buffer.from(pem as string), der as Buffer, Buffer.from(String(jwk.x ?? jwk.n))]) {
      const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid }).sign(new Uint8Array(secret));
      expect401(await userinfo(t.app, forged));
    }
    const attacker = await generateKeyPair('ES256');
    const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', kid }).sign(attacker.privateKey);
    expect401(await userinfo(t.app, forged));
    const embedded = await new SignJWT(claims)
      .setProtectedHeader({ alg: 'ES256', typ: 'at+jwt', jwk: await exportJWK(attacker.publicKey), jku: 'https://canary.test/jwks' })
      .sign(attacker.privateKey);
    expect401(await userinfo(t.app, embedded));
  });

  it('item 37: a changed payload or a stripped signature → 401', async () => {
    const [h, , s] = tokens.access_token.split('.');
    const claims = { ...decodeJwt(tokens.access_token), sub: 'usr_someone_else' };
    expect401(await userinfo(t.app, `${h}.${base64url.encode(JSON.stringify(claims))}.${s}`));
    expect401(await userinfo(t.app, `${h}.${tokens.access_token.split('.')[1]}.`));
    expect401(await userinfo(t.app, `${tokens.access_token}x`));
  });

  it('item 36: hostile kid values → 401, never 5xx', async () => {
    const claims = decodeJwt(tokens.access_token);
    for (const kid of ['../../../../dev/null', "x' UNION SELECT 'k'--", "' OR '1'='1", 'k'.repeat(10_000), '\u0000', '%0d%0a']) {
      const forged = await new SignJWT(claims).setProtectedHeader({ alg: 'HS256', typ: 'at+jwt', kid }).sign(new Uint8Array(32));
      const res = await userinfo(t.app, forged);
      expect(res.statusCode).toBeLessThan(500);
      expect(res.statusCode).toBe(401);
    }
  });

  it('item 40: a session JWT and an ID token are not access tokens', async () => {
    const claims = decodeJwt(tokens.access_token);
    const session = await t.app.tokens.mintSession({ userId: claims.sub!, appId: appA.app.id, grantId: claims.sid as string });
    expect401(await userinfo(t.app, session));
    expect401(await userinfo(t.app, tokens.id_token!));
  });

  it('item 38: an expired access token → 401', async () => {
    const s = await signedInWithTokens(t, appA);
    t.clock.advance(900 + 31);
    expect401(await userinfo(t.app, s.tokens.access_token));
  });

  it('CORS: the app’s origins (allowed_origins too) may call userinfo; others may not', async () => {
    const s = await signedInWithTokens(t, appA);
    const res = await t.app.inject({ url: '/oauth/userinfo', headers: { authorization: `Bearer ${s.tokens.access_token}`, origin: 'https://spa.example' } });
    expect(res.headers['access-control-allow-origin']).toBe('https://spa.example');
    const evil = await t.app.inject({ url: '/oauth/userinfo', headers: { authorization: `Bearer ${s.tokens.access_token}`, origin: 'https://evil.example' } });
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    const pre = await t.app.inject({ method: 'OPTIONS', url: '/oauth/userinfo', headers: { origin: 'https://spa.example', 'access-control-request-method': 'GET', 'access-control-request-headers': 'authorization' } });
    expect(pre.statusCode).toBe(204);
    expect(pre.headers['access-control-allow-headers']).toContain('Authorization');
  });
});
