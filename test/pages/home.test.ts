import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';

/** `GET /`: a landing page outside production (issue 15), the JSON 404 in production. */
describe('GET / outside production', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { AUTH_URL: 'http://127.0.0.1:3000' } });
  });
  afterAll(async () => t.close());

  it('links the console, the demo, the dev mailbox, discovery and /docs, without script', async () => {
    const res = await t.app.inject('/');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/html/);
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    for (const href of [
      'http://127.0.0.1:3000/console',
      'http://localhost:3000/demo',
      'http://localhost:3000/dev/mailbox',
      'http://localhost:3000/.well-known/openid-configuration',
      'http://localhost:3000/docs',
    ]) {
      expect(res.body).toContain(`href="${href}"`);
    }
    expect(res.body).toContain('<link rel="stylesheet" href="/assets/gatehouse.css">');
    expect(res.body).not.toContain('<script');
    expect(res.body).toContain('Developer console');

    const zh = await t.app.inject({ url: '/', headers: { 'accept-language': 'zh-CN,zh;q=0.9' } });
    expect(zh.body).toContain('<html lang="zh-CN" dir="ltr">');
    expect(zh.body).toContain('开发者控制台');
    expect((await t.app.inject({ method: 'HEAD', url: '/' })).statusCode).toBe(200);
  });
});

describe('GET / in production', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { NODE_ENV: 'production', BASE_URL: 'https://auth.test' } });
  });
  afterAll(async () => t.close());

  it('keeps the JSON 404', async () => {
    const res = await t.app.inject('/');
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found' });
  });
});
