import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { VIEW_LIMIT_PER_MINUTE } from '../../src/legal/service.js';
import { epochSeconds } from '../../src/shared/time.js';
import { buildTestApp, FrozenClock, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';
import type { App } from '../../src/storage/repos/apps.js';

describe('legal documents', () => {
  let t: TestApp;
  let dev: Awaited<ReturnType<typeof makeDeveloper>>;
  let app: App;

  const adminPut = (docType: string, lang: string, body: Record<string, unknown>) =>
    t.app.inject({ method: 'PUT', url: `/v1/admin/legal/${docType}?lang=${lang}`, headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }, payload: body });
  const devPut = (docType: string, lang: string, body: Record<string, unknown>, appId = app.id, key = dev.apiKey) =>
    t.app.inject({ method: 'PUT', url: `/v1/dev/apps/${appId}/legal/${docType}?lang=${lang}`, headers: { authorization: `Bearer ${key}` }, payload: body });

  beforeAll(async () => {
    // Time moves only when a test moves it: the view limit is counted on this clock.
    t = await buildTestApp({ clock: new FrozenClock(epochSeconds()) });
    dev = await makeDeveloper(t.db);
    app = await makeApp(t.db, { developerId: dev.id, name: 'Acme <b>App</b>' });
  });
  afterAll(async () => t.close());

  it('admin publishes platform terms (201, version 1, then 2); GET serves the newest', async () => {
    const first = await adminPut('terms', 'en', { title: 'Terms', content: '# Terms\n\nBe nice.' });
    expect(first.statusCode).toBe(201);
    expect(first.json()).toMatchObject({ docType: 'terms', lang: 'en', version: 1, title: 'Terms' });
    const second = await adminPut('terms', 'en', { title: 'Terms v2', content: 'Version **two**.' });
    expect(second.json().version).toBe(2);
    const got = await t.app.inject({ method: 'GET', url: '/v1/legal/platform/terms' });
    expect(got.statusCode).toBe(200);
    const body = got.json();
    expect(Object.keys(body).sort()).toEqual(['available_langs', 'content', 'content_html', 'docType', 'lang', 'title', 'updated_at', 'url', 'version'].sort());
    expect(body).toMatchObject({ docType: 'terms', lang: 'en', version: 2, title: 'Terms v2', content: 'Version **two**.', available_langs: ['en'] });
    expect(body.content_html).toContain('<strong>two</strong>');
    expect(body.url).toBe(`${t.config.authUrl}/legal/platform/terms?lang=en`);
    expect(got.headers['access-control-allow-origin']).toBe('*');
    expect(got.headers['access-control-allow-credentials']).toBeUndefined();
    expect(got.headers['set-cookie']).toBeUndefined();
  });

  it('admin writes need the admin token; developer keys cannot write platform documents', async () => {
    const res = await t.app.inject({ method: 'PUT', url: '/v1/admin/legal/terms?lang=en', headers: { authorization: `Bearer ${dev.apiKey}` }, payload: { title: 'x', content: 'y' } });
    expect(res.statusCode).toBe(401);
  });

  it('script, event handlers and javascript: links are removed from the rendered HTML', async () => {
    const content = [
      '<script>alert(1)</script>',
      '<img src=x onerror=alert(2)>',
      '[click](javascript:alert(3))',
      '<a href="JaVaScRiPt:alert(4)">x</a>',
      '<p onclick="alert(5)">para</p>',
      '<iframe src="https://evil.example"></iframe>',
      '[ok](https://example.com/terms)',
    ].join('\n\n');
    const res = await devPut('privacy', 'en', { title: 'Privacy', content });
    expect(res.statusCode).toBe(201);
    const html: string = res.json().content_html;
    expect(html).not.toMatch(/<script/i);
    expect(html).not.toMatch(/onerror|onclick/i);
    expect(html).not.toMatch(/javascript:/i);
    expect(html).not.toMatch(/<iframe/i);
    expect(html).toContain('href="https://example.com/terms"');
    // The stored Markdown is returned as written (it is data), only content_html is HTML.
    const got = (await t.app.inject(`/v1/legal/apps/${app.id}/privacy`)).json();
    expect(got.content).toBe(content);
    expect(got.appId).toBe(app.id);
    // The hosted page shows the sanitized HTML, with our CSP.
    const page = await t.app.inject(`/legal/apps/${app.id}/privacy`);
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-type']).toMatch(/^text\/html/);
    expect(page.body).not.toMatch(/<script|onerror|javascript:/i);
    expect(page.body).toContain('https://example.com/terms');
    expect(page.body).toContain('Acme &lt;b&gt;App&lt;/b&gt;');
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
  });

  it('language fallback: exact → primary subtag → default; "default": true moves the default', async () => {
    await devPut('terms', 'en', { title: 'Terms EN', content: 'en' });
    await devPut('terms', 'zh-CN', { title: '条款', content: 'zh' });
    await devPut('terms', 'de', { title: 'AGB', content: 'de' });
    const get = async (lang?: string) => (await t.app.inject(`/v1/legal/apps/${app.id}/terms${lang ? `?lang=${encodeURIComponent(lang)}` : ''}`)).json();
    expect((await get('zh-CN')).lang).toBe('zh-CN');
    expect((await get('zh-cn')).lang).toBe('zh-CN');
    expect((await get('zh')).lang).toBe('zh-CN'); // primary subtag
    expect((await get('zh-TW')).lang).toBe('zh-CN');
    expect((await get('de-AT')).lang).toBe('de');
    expect((await get('fr')).lang).toBe('en'); // default = first published
    expect((await get()).lang).toBe('en');
    expect((await get()).available_langs).toEqual(['en', 'zh-CN', 'de']);
    const moved = await devPut('terms', 'de', { title: 'AGB 2', content: 'de2', default: true });
    expect(moved.json().version).toBe(2);
    expect((await get('fr')).lang).toBe('de');
    expect((await get('fr')).title).toBe('AGB 2');
    // Not a language tag at all → 404, never a file lookup.
    expect((await t.app.inject(`/v1/legal/apps/${app.id}/terms?lang=../../x`)).statusCode).toBe(404);
  });

  it('unknown documents, apps and malformed docTypes → 404 / 400; traversal never escapes', async () => {
    expect((await t.app.inject('/v1/legal/platform/nope')).json().code).toBe('not_found');
    expect((await t.app.inject('/v1/legal/apps/app_missing/terms')).statusCode).toBe(404);
    expect((await t.app.inject('/v1/legal/apps/app_missing')).statusCode).toBe(404);
    expect((await t.app.inject('/v1/legal/platform/..%2F..%2Fetc%2Fpasswd')).statusCode).toBeGreaterThanOrEqual(400);
    expect((await t.app.inject('/v1/legal/platform/%2e%2e')).statusCode).toBeGreaterThanOrEqual(400);
    expect((await t.app.inject('/v1/legal/platform/Terms')).statusCode).toBe(400);
    const bad = await devPut('Bad_Type', 'en', { title: 'x', content: 'y' });
    expect(bad.statusCode).toBe(400);
  });

  it('legal center lists the app’s documents and every platform document', async () => {
    await adminPut('privacy', 'en', { title: 'Platform privacy', content: 'p' });
    const res = await t.app.inject(`/v1/legal/apps/${app.id}`);
    expect(res.statusCode).toBe(200);
    const body = res.json();
    expect(body.appId).toBe(app.id);
    expect(body.app_name).toBe('Acme <b>App</b>');
    expect(body.documents.map((d: { docType: string }) => d.docType)).toEqual(['privacy', 'terms']);
    const terms = body.documents.find((d: { docType: string }) => d.docType === 'terms');
    expect(terms).toMatchObject({ title: 'AGB 2', version: 2, langs: ['en', 'zh-CN', 'de'] });
    expect(Object.keys(terms).sort()).toEqual(['docType', 'langs', 'title', 'updated_at', 'url', 'version']);
    expect(body.platform.map((d: { docType: string }) => d.docType)).toEqual(['privacy', 'terms']);
  });

  it('another developer cannot publish for this app (404)', async () => {
    const other = await makeDeveloper(t.db);
    const res = await devPut('terms', 'en', { title: 'x', content: 'y' }, app.id, other.apiKey);
    expect(res.statusCode).toBe(404);
  });

  it('views: POST counts per (docType, lang, version, day); hosted pages count too; unknown → 404', async () => {
    const view = (body: Record<string, unknown>, ip = '10.0.0.1') =>
      t.app.inject({ method: 'POST', url: `/v1/legal/apps/${app.id}/view`, payload: body, remoteAddress: ip });
    expect((await view({ docType: 'terms', lang: 'zh-CN' })).statusCode).toBe(202);
    expect((await view({ docType: 'terms', lang: 'zh' })).statusCode).toBe(202);
    expect((await view({ docType: 'terms', lang: 'de', version: 1 })).statusCode).toBe(202);
    expect((await view({ docType: 'nope' })).statusCode).toBe(404);
    expect((await view({ docType: 'terms', version: 99 })).statusCode).toBe(404);
    expect((await view({ docType: 'terms', extra: 1 })).statusCode).toBe(400);
    expect((await t.app.inject(`/legal/apps/${app.id}/terms?lang=zh-CN`)).statusCode).toBe(200);
    const today = new Date(t.clock.now() * 1000).toISOString().slice(0, 10);
    const res = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${app.id}/legal/views?from=${today}&to=${today}`, headers: { authorization: `Bearer ${dev.apiKey}` } });
    expect(res.statusCode).toBe(200);
    const items = res.json().items as Array<Record<string, unknown>>;
    expect(items).toContainEqual({ docType: 'terms', lang: 'zh-CN', version: 1, day: today, count: 3 });
    expect(items).toContainEqual({ docType: 'terms', lang: 'de', version: 1, day: today, count: 1 });
  });

  it('views are throttled per IP: at most VIEW_LIMIT_PER_MINUTE in any minute (429 with Retry-After)', async () => {
    const view = () => t.app.inject({ method: 'POST', url: `/v1/legal/apps/${app.id}/view`, payload: { docType: 'terms' }, remoteAddress: '10.9.9.9' });
    // Half the budget now, half 30 s later: a fixed minute starting in between would allow more.
    for (let i = 0; i < VIEW_LIMIT_PER_MINUTE / 2; i++) expect((await view()).statusCode).toBe(202);
    t.clock.advance(30);
    for (let i = 0; i < VIEW_LIMIT_PER_MINUTE / 2; i++) expect((await view()).statusCode).toBe(202);
    const refused = await view();
    expect(refused.statusCode).toBe(429);
    expect(refused.headers['retry-after']).toBe('30');
    // The first half leaves the window 60 s after it was counted: exactly that many views are allowed again.
    t.clock.advance(30);
    for (let i = 0; i < VIEW_LIMIT_PER_MINUTE / 2; i++) expect((await view()).statusCode).toBe(202);
    expect((await view()).statusCode).toBe(429);
  });

  it('the hosted platform page renders in the document language with a language switcher', async () => {
    await adminPut('terms', 'zh-CN', { title: '平台条款', content: '你好' });
    const page = await t.app.inject('/legal/platform/terms?lang=zh');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('lang="zh-CN"');
    expect(page.body).toContain('平台条款');
    expect(page.body).toContain('hreflang="en"');
    expect((await t.app.inject('/legal/platform/nope')).statusCode).toBe(404);
  });
});
