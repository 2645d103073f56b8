import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient } from '../helpers/oauth-flows.js';

describe('/demo', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('explains what to do when there is no demo app', async () => {
    const res = await t.app.inject('/demo');
    expect(res.statusCode).toBe(200);
    expect(res.body).toContain('No demo app found');
    expect(res.headers['content-security-policy']).toContain("script-src 'self'");
  });

  it('uses the app named demo whose redirect URI is {base_url}/demo/callback, or ?client_id=', async () => {
    const demo = await makeClient(t, { name: 'demo', redirectUris: [`${t.config.baseUrl}/demo/callback`] });
    const res = await t.app.inject('/demo');
    expect(res.body).toContain(`data-client-id="${demo.app.id}"`);
    const other = await makeClient(t, { name: 'Other', redirectUris: [`${t.config.baseUrl}/demo/callback`] });
    expect((await t.app.inject(`/demo?client_id=${other.app.id}`)).body).toContain(`data-client-id="${other.app.id}"`);
    const unrelated = await makeClient(t);
    expect((await t.app.inject(`/demo?client_id=${unrelated.app.id}`)).body).toContain('No demo app found');
    const js = await t.app.inject('/assets/demo.js');
    expect(js.headers['content-type']).toMatch(/javascript/);
    expect((await t.app.inject('/demo/callback')).statusCode).toBe(200);
  });

  it('opened on another loopback host than {base_url} (localhost), starts over on {base_url}', async () => {
    for (const host of ['127.0.0.1:3000', '[::1]:3000', '127.0.0.1']) {
      const res = await t.app.inject({ url: '/demo?client_id=app_x', headers: { host } });
      expect(res.statusCode, host).toBe(302);
      expect(res.headers.location).toBe('http://localhost:3000/demo?client_id=app_x');
    }
    for (const host of ['localhost:3000', 'localhost:8080', 'gatehouse.internal:3000']) {
      expect((await t.app.inject({ url: '/demo', headers: { host } })).statusCode, host).toBe(200);
    }
  });

  it('HEAD /oauth/authorize does not run the flow', async () => {
    const res = await t.app.inject({ method: 'HEAD', url: '/oauth/authorize?client_id=x' });
    expect(res.headers.location).toBeUndefined();
  });
});

describe('/demo in production', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { NODE_ENV: 'production', BASE_URL: 'https://auth.test' } });
  });
  afterAll(async () => t.close());

  it('is not served', async () => {
    expect((await t.app.inject('/demo')).statusCode).toBe(404);
    expect((await t.app.inject('/assets/demo.js')).statusCode).toBe(404);
  });
});
