import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';

const BASE = 'http://localhost:3000';
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'k', 'oth'];

describe('discovery and JWKS (docs/reference/oauth.md#endpoints)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
    const dev = await createDeveloperViaApi(t);
    const create = (body: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(dev.apiKey), payload: body });
    await create(appBody({ redirect_uris: ['https://spa.example/cb', 'http://127.0.0.1:5173/cb', 'com.example.app://cb'], allowed_origins: ['https://extra.example'] }));
    const disabled = (await create(appBody({ redirect_uris: ['https://disabled.example/cb'] }))).json();
    await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${disabled.id}`, headers: bearer(dev.apiKey), payload: { disabled: true } });
  });
  afterAll(async () => t.close());

  it.each(['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'])('%s lists every field of docs/reference/oauth.md#endpoints', async (path) => {
    const res = await t.app.inject(path);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    expect(res.json()).toMatchObject({
      issuer: BASE,
      authorization_endpoint: `${BASE}/oauth/authorize`,
      token_endpoint: `${BASE}/oauth/token`,
      jwks_uri: `${BASE}/oauth/jwks`,
      userinfo_endpoint: `${BASE}/oauth/userinfo`,
      revocation_endpoint: `${BASE}/oauth/revoke`,
      introspection_endpoint: `${BASE}/oauth/introspect`,
      end_session_endpoint: `${BASE}/oauth/logout`,
      response_types_supported: ['code'],
      grant_types_supported: ['authorization_code', 'refresh_token', 'client_credentials', 'urn:ietf:params:oauth:grant-type:device_code'],
      code_challenge_methods_supported: ['S256'],
      token_endpoint_auth_methods_supported: ['none', 'client_secret_basic', 'client_secret_post'],
      scopes_supported: expect.arrayContaining(['openid', 'profile', 'email', 'offline_access']),
      claims_supported: expect.arrayContaining(['sub', 'iss', 'email', 'email_verified', 'name']),
      subject_types_supported: ['public'],
      id_token_signing_alg_values_supported: ['RS256', 'ES256'],
      authorization_response_iss_parameter_supported: true,
    });
  });

  it('both documents are identical', async () => {
    const a = (await t.app.inject('/.well-known/openid-configuration')).json();
    const b = (await t.app.inject('/.well-known/oauth-authorization-server')).json();
    expect(a).toEqual(b);
  });

  it('the JWKS publishes public keys only, each with kid, alg and use', async () => {
    const res = await t.app.inject('/oauth/jwks');
    expect(res.statusCode).toBe(200);
    expect(res.headers['cache-control']).toBe('public, max-age=300');
    const { keys } = res.json();
    expect(keys.map((k: { alg: string }) => k.alg).sort()).toEqual(['ES256', 'RS256']);
    for (const key of keys) {
      expect(key).toMatchObject({ kid: expect.any(String), alg: expect.stringMatching(/^(ES256|RS256)$/), use: 'sig', kty: expect.stringMatching(/^(EC|RSA)$/) });
      for (const member of PRIVATE_MEMBERS) expect(key, `${key.kid} has ${member}`).not.toHaveProperty(member);
    }
    expect(new Set(keys.map((k: { kid: string }) => k.kid)).size).toBe(keys.length);
  });

  describe('CORS (docs/reference/rest-api.md#cors)', () => {
    const paths = ['/oauth/jwks', '/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'];

    it.each(paths)('%s allows the origins of every app’s http(s) redirect URIs and allowed_origins', async (path) => {
      for (const origin of ['https://spa.example', 'http://127.0.0.1:5173', 'https://extra.example']) {
        const res = await t.app.inject({ url: path, headers: { origin } });
        expect(res.headers['access-control-allow-origin'], origin).toBe(origin);
        expect(res.headers['access-control-allow-credentials']).toBeUndefined();
        expect(res.headers.vary).toMatch(/Origin/);
      }
    });

    it.each([
      'https://evil.example',
      'https://spa.example.evil.example',
      'http://spa.example',
      'https://spa.example:8443',
      'null',
      'https://disabled.example',
    ])('does not allow %s', async (origin) => {
      const res = await t.app.inject({ url: '/oauth/jwks', headers: { origin } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    });

    it('answers preflights: 204 with methods and headers for an allowed origin, nothing for others', async () => {
      const allowed = await t.app.inject({
        method: 'OPTIONS',
        url: '/oauth/jwks',
        headers: { origin: 'https://spa.example', 'access-control-request-method': 'GET' },
      });
      expect(allowed.statusCode).toBe(204);
      expect(allowed.headers['access-control-allow-origin']).toBe('https://spa.example');
      expect(allowed.headers['access-control-allow-methods']).toBe('GET, POST, PUT, DELETE');
      expect(allowed.headers['access-control-allow-headers']).toBe('Authorization, Content-Type, X-Client-Id, If-Match, DPoP');

      const denied = await t.app.inject({
        method: 'OPTIONS',
        url: '/.well-known/openid-configuration',
        headers: { origin: 'https://evil.example', 'access-control-request-method': 'GET' },
      });
      expect(denied.headers['access-control-allow-origin']).toBeUndefined();
      expect(denied.headers['access-control-allow-methods']).toBeUndefined();
    });

    it('never answers with a wildcard origin', async () => {
      const res = await t.app.inject({ url: '/oauth/jwks' });
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    });
  });
});
