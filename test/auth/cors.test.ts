import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import type { App } from '../../src/storage/repos/apps.js';

// docs/reference/rest-api.md#cors: /v1/auth/* and /v1/email_verify/* allow the origins of the app's http(s)
// redirect URIs plus its allowed_origins; a disallowed origin gets no Access-Control-Allow-Origin.
describe('CORS on /v1/auth and /v1/email_verify', () => {
  let t: TestApp;
  let client: App;
  const SPA = 'https://spa.example';
  const EXTRA = 'https://extra.example';
  const EVIL = 'https://evil.example';

  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000' } });
    client = await makeApp(t.db, { redirectUris: [`${SPA}/callback`, 'com.example.app://cb'], allowedOrigins: [EXTRA] });
  });
  afterAll(async () => t.close());

  const login = (origin: string, password = 'wrong password here') =>
    t.app.inject({ method: 'POST', url: '/v1/auth/login', headers: { origin }, payload: { email: 'nobody@example.com', password, client_id: client.id } });

  it('allows the app’s redirect-URI origin and allowed_origins, on errors too, never with credentials', async () => {
    for (const origin of [SPA, EXTRA]) {
      const res = await login(origin);
      expect(res.statusCode).toBe(401);
      expect(res.headers['access-control-allow-origin']).toBe(origin);
      expect(res.headers['access-control-allow-credentials']).toBeUndefined();
      expect(res.headers.vary).toMatch(/Origin/);
    }
  });

  it('sends no Access-Control-Allow-Origin to other origins', async () => {
    const res = await login(EVIL);
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('the app named by X-Client-Id counts when the body names none', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/v1/auth/refresh', headers: { origin: SPA, 'x-client-id': client.id }, payload: { refresh_token: 'rt_unknown' } });
    expect(res.statusCode).toBe(400);
    expect(res.headers['access-control-allow-origin']).toBe(SPA);
  });

  it('answers preflights for an app origin and refuses others', async () => {
    const preflight = (origin: string, url: string) =>
      t.app.inject({ method: 'OPTIONS', url, headers: { origin, 'access-control-request-method': 'POST', 'access-control-request-headers': 'content-type, authorization' } });
    for (const url of ['/v1/auth/login', '/v1/email_verify/confirm']) {
      const ok = await preflight(SPA, url);
      expect(ok.statusCode).toBe(204);
      expect(ok.headers['access-control-allow-origin']).toBe(SPA);
      expect(ok.headers['access-control-allow-methods']).toContain('POST');
      expect(String(ok.headers['access-control-allow-headers']).toLowerCase()).toContain('authorization');
      const evil = await preflight(EVIL, url);
      expect(evil.headers['access-control-allow-origin']).toBeUndefined();
    }
  });

  it('email verification allows the origins of the credential’s app', async () => {
    const user = await makeUser(t.app);
    const { response } = await t.app.tokens.issueTokens(t.db, { app: client, user, scope: 'openid email', authTime: t.clock.now(), amr: ['pwd'] });
    const auth = { authorization: `Bearer ${response.access_token}` };
    const ok = await t.app.inject({ method: 'POST', url: '/v1/email_verify/confirm', headers: { ...auth, origin: SPA }, payload: { code: '000000' } });
    expect(ok.statusCode).toBe(400);
    expect(ok.headers['access-control-allow-origin']).toBe(SPA);
    const evil = await t.app.inject({ method: 'POST', url: '/v1/email_verify/confirm', headers: { ...auth, origin: EVIL }, payload: { code: '000000' } });
    expect(evil.headers['access-control-allow-origin']).toBeUndefined();
  });
});
