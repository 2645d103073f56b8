import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { bearer } from '../helpers/dev-api.js';
import { consoleSignIn, developerBrowser, postForm } from './console-helpers.js';

/**
 * The console's settings beyond the basics (docs/guides/console.md#app-settings): back-channel logout,
 * DPoP, PAR, password policy and per-app mail, saved through the developer API's services and checked by
 * its schemas, so the API shows each change.
 */
describe('console app settings: logout, DPoP, password policy, mail', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t?.close());

  async function setUp() {
    const dev = await developerBrowser(t);
    await consoleSignIn(dev.browser);
    const posted = await postForm(dev.browser, '/console', '/console/apps', { action: 'create', name: 'Shop', type: 'public', redirect_uris: 'https://shop.example/cb', features: 'auth' });
    const appId = /^\/console\/apps\/([^/?]+)$/.exec(String(posted.headers.location))![1]!;
    const apiView = async () => (await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${appId}`, headers: bearer(dev.developer.api_key) })).json();
    return { ...dev, appId, appUrl: `/console/apps/${appId}`, apiView };
  }
  const base = { action: 'save', name: 'Shop', redirect_uris: 'https://shop.example/cb', features: 'auth', mfa: 'optional' };
  const policy = { password_min_length: '8', password_character_classes: '0', password_max_age_days: '', password_history_count: '0' };

  it('saves back-channel logout, DPoP, PAR and the password policy as the API shows them', async () => {
    const { browser, appUrl, apiView } = await setUp();
    const saved = await postForm(browser, appUrl, appUrl, {
      ...base,
      backchannel_logout_uri: 'https://shop.example/logout',
      backchannel_logout_session_required: 'on',
      dpop_bound_access_tokens: 'on',
      require_pushed_authorization_requests: 'on',
      password_min_length: '12',
      password_character_classes: '3',
      password_max_age_days: '90',
      password_history_count: '5',
    });
    expect(saved.statusCode).toBe(303);
    expect(await apiView()).toMatchObject({
      backchannel_logout_uri: 'https://shop.example/logout',
      backchannel_logout_session_required: true,
      dpop_bound_access_tokens: true,
      require_pushed_authorization_requests: true,
      password_policy: { min_length: 12, character_classes: 3, max_age_days: 90, history_count: 5 },
    });
    const page = await browser.get(appUrl);
    expect(page.body).toContain('value="https://shop.example/logout"');
    expect(page.body).toMatch(/name="dpop_bound_access_tokens" checked/);
    expect(page.body).toMatch(/name="require_pushed_authorization_requests" checked/);
    expect(page.body).toMatch(/id="password_max_age_days"[^>]*value="90"/);
    // Unchecked boxes and an empty URI and maximum age turn them off again.
    expect((await postForm(browser, appUrl, appUrl, { ...base, ...policy })).statusCode).toBe(303);
    expect(await apiView()).toMatchObject({
      backchannel_logout_uri: null,
      backchannel_logout_session_required: false,
      dpop_bound_access_tokens: false,
      require_pushed_authorization_requests: false,
      password_policy: { min_length: 8, character_classes: 0, max_age_days: null, history_count: 0 },
    });
  });

  it('shows bad input at its field and changes nothing', async () => {
    const { browser, appUrl, apiView } = await setUp();
    const before = await apiView();
    // The API's target policy for the URI, its message at the field.
    const badUri = await postForm(browser, appUrl, appUrl, { ...base, ...policy, backchannel_logout_uri: 'ftp://shop.example/logout', dpop_bound_access_tokens: 'on' });
    expect(badUri.statusCode).toBe(400);
    expect(badUri.body).toMatch(/id="backchannel_logout_uri-error"[^>]*>must be an https URL/);
    expect(badUri.body).toContain('value="ftp://shop.example/logout"');
    const badPolicy = await postForm(browser, appUrl, appUrl, { ...base, password_min_length: '4', password_character_classes: '5', password_max_age_days: 'soon', password_history_count: '99' });
    expect(badPolicy.statusCode).toBe(400);
    for (const name of ['password_min_length', 'password_character_classes', 'password_max_age_days', 'password_history_count']) expect(badPolicy.body).toContain(`id="${name}-error"`);
    expect(await apiView()).toEqual(before);
  });

  it('saves the APIs and, for a confidential app, client credentials; refuses a bad resource URI at its field', async () => {
    const { browser } = await setUp();
    const created = await postForm(browser, '/console', '/console/apps', { action: 'create', name: 'Backend', type: 'confidential', redirect_uris: 'https://backend.example/cb', features: 'auth' });
    const appUrl = String(created.headers.location).replace(/\?.*$/, '');
    const form = { ...base, ...policy, name: 'Backend', redirect_uris: 'https://backend.example/cb' };
    const saved = await postForm(browser, appUrl, appUrl, { ...form, resource_uris: 'https://orders.example/\nhttps://billing.example/v1', client_credentials: 'on', client_credentials_scopes: 'orders:read  orders:write' });
    expect(saved.statusCode).toBe(303);
    const page = await browser.get(appUrl);
    expect(page.body).toMatch(/name="client_credentials" checked/);
    expect(page.body).toContain('value="orders:read orders:write"');
    expect(page.body).toContain('https://orders.example/\nhttps://billing.example/v1</textarea>');
    const bad = await postForm(browser, appUrl, appUrl, { ...form, resource_uris: 'https://orders.example/#part', client_credentials_scopes: 'openid' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('id="resource_uris-error"');
    expect(bad.body).toContain('id="client_credentials_scopes-error"');
  });

  it('offers client credentials only to a confidential app', async () => {
    const { browser, appUrl, apiView } = await setUp();
    expect((await browser.get(appUrl)).body).not.toContain('name="client_credentials"');
    const forced = await postForm(browser, appUrl, appUrl, { ...base, ...policy, client_credentials: 'on' });
    expect(forced.statusCode).toBe(400);
    expect((await apiView()).client_credentials).toBe(false);
  });

  it('saves the Reply-To and one override, previews the mail as rendered, and refuses bad mail input', async () => {
    const { browser, appUrl, apiView } = await setUp();
    const mailUrl = `${appUrl}/mail?kind=password_reset&locale=zh-CN`;
    const saved = await postForm(browser, mailUrl, `${appUrl}/mail`, { action: 'save', kind: 'password_reset', locale: 'zh-CN', reply_to: 'help@shop.example', subject: '重置您的 Shop 密码', intro: '有人请求重置密码。' });
    expect(saved.statusCode).toBe(303);
    expect(saved.headers.location).toBe(`${appUrl}/mail?kind=password_reset&locale=zh-CN&saved=1`);
    expect((await apiView()).mail).toEqual({ reply_to: 'help@shop.example', overrides: { password_reset: { 'zh-CN': { subject: '重置您的 Shop 密码', intro: '有人请求重置密码。' } } } });
    // A second override keeps the first.
    expect((await postForm(browser, `${appUrl}/mail?kind=magic_link&locale=en`, `${appUrl}/mail`, { action: 'save', kind: 'magic_link', locale: 'en', reply_to: 'help@shop.example', subject: 'Your Shop link', intro: '' })).statusCode).toBe(303);
    expect(Object.keys((await apiView()).mail.overrides).sort()).toEqual(['magic_link', 'password_reset']);

    const page = await browser.get(mailUrl);
    expect(page.body).toContain('value="重置您的 Shop 密码"');
    expect(page.headers['content-security-policy']).toContain("frame-src 'self'");
    const preview = await browser.get(`${appUrl}/mail/preview?kind=password_reset&locale=zh-CN`);
    expect(preview.statusCode).toBe(200);
    expect(preview.headers['content-security-policy']).toMatch(/^sandbox;/);
    expect(preview.body).toContain('<title>重置您的 Shop 密码</title>');
    expect(preview.body).toContain('有人请求重置密码。');
    expect(preview.body).toContain('Shop');
    expect((await browser.get(`${appUrl}/mail/preview?kind=nope&locale=en`)).statusCode).toBe(400);

    // Removing both texts removes that override.
    expect((await postForm(browser, `${appUrl}/mail?kind=magic_link&locale=en`, `${appUrl}/mail`, { action: 'save', kind: 'magic_link', locale: 'en', reply_to: 'help@shop.example', subject: '', intro: '' })).statusCode).toBe(303);
    const before = await apiView();
    expect(Object.keys(before.mail.overrides)).toEqual(['password_reset']);
    const bad = await postForm(browser, mailUrl, `${appUrl}/mail`, { action: 'save', kind: 'password_reset', locale: 'zh-CN', reply_to: 'Shop <help@shop.example>', subject: 'x'.repeat(151), intro: 'ok' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('id="reply_to-error"');
    expect(bad.body).toContain('id="subject-error"');
    expect(await apiView()).toEqual(before);
  });

  it('lets another developer neither see, preview nor change these settings', async () => {
    const { appId, apiView } = await setUp();
    const before = await apiView();
    const other = await developerBrowser(t);
    await consoleSignIn(other.browser);
    expect((await other.browser.get(`/console/apps/${appId}/mail`)).statusCode).toBe(404);
    expect((await other.browser.get(`/console/apps/${appId}/mail/preview?kind=verify_code&locale=en`)).statusCode).toBe(404);
    // With a valid CSRF token of their own console session.
    const save = await postForm(other.browser, '/console', `/console/apps/${appId}`, { ...base, ...policy, dpop_bound_access_tokens: 'on', require_pushed_authorization_requests: 'on', password_min_length: '20' });
    expect(save.statusCode).toBe(404);
    const mail = await postForm(other.browser, '/console', `/console/apps/${appId}/mail`, { action: 'save', kind: 'verify_code', locale: 'en', reply_to: 'evil@attacker.example', subject: 'Hi', intro: '' });
    expect(mail.statusCode).toBe(404);
    expect(await apiView()).toEqual(before);
  });

  it('refuses a settings post without the CSRF token', async () => {
    const { browser, appUrl, apiView } = await setUp();
    const before = await apiView();
    const res = await browser.post(`${appUrl}/mail`, { action: 'save', kind: 'verify_code', locale: 'en', reply_to: 'x@shop.example', subject: 'Hi', intro: '' });
    expect(res.statusCode).toBe(403);
    const res2 = await browser.post(appUrl, { ...base, ...policy, dpop_bound_access_tokens: 'on' });
    expect(res2.statusCode).toBe(403);
    expect(await apiView()).toEqual(before);
  });
});
