import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pickLocale } from '../../src/plugins/i18n.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

describe('hosted page infrastructure', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('renders the error page with the security headers of docs/guides/hosted-pages.md#pages-sessions-and-headers', async () => {
    const res = await t.app.inject('/error');
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/text\/html/);
    expect(res.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(res.headers['content-security-policy']).not.toContain('unsafe-inline');
    expect(res.headers['x-frame-options']).toBe('DENY');
    expect(res.headers['referrer-policy']).toBe('no-referrer');
    expect(res.body).toContain('Something went wrong');
  });

  it('speaks Simplified Chinese when asked', async () => {
    const res = await t.app.inject({ url: '/error', headers: { 'accept-language': 'zh-CN,zh;q=0.9,en;q=0.5' } });
    expect(res.body).toContain('出错了');
    expect(res.body).toContain('lang="zh-CN"');
  });
});

describe('pickLocale', () => {
  it.each([
    [undefined, undefined, 'en'],
    ['zh-CN', 'en', 'zh-CN'],
    ['fr en', 'zh-CN', 'fr'],
    ['tlh en', 'zh-CN', 'en'],
    [undefined, 'tlh;q=1, zh-Hans;q=0.8, en;q=0.5', 'zh-CN'],
    [undefined, 'en-GB,zh;q=0.9', 'en'],
    [undefined, 'de, fr', 'de'],
    [undefined, 'nl, sv', 'en'],
  ])('ui_locales=%s accept-language=%s → %s', (ui, accept, expected) => {
    expect(pickLocale(ui, accept)).toBe(expected);
  });
});
