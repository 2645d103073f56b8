import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findApp } from '../../src/storage/repos/apps.js';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { bearer, createDeveloperViaApi, appBody } from '../helpers/dev-api.js';
import { authorizeUrl, Browser, csrfOf, makeClient } from '../helpers/oauth-flows.js';

/** The language switcher of every hosted page and the choice order (docs/guides/hosted-pages.md, "Languages"). */

const switcherBack = (html: string) => /<input type="hidden" name="back" value="([^"]*)">/.exec(html)?.[1]?.replace(/&amp;/g, '&');

describe('language switcher and choice order', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('every page has a labelled select with each language in itself, and Arabic pages are right to left', async () => {
    const page = (await t.app.inject('/login?ui_locales=ar')).body;
    expect(page).toContain('<html lang="ar" dir="rtl">');
    expect(page).toMatch(/<form class="language" method="post" action="\/language">/);
    expect(page).toContain('<label for="language-choice">اللغة</label>');
    expect(page).toContain('<option value="ar" lang="ar" selected>العربية</option>');
    expect(page).toContain('<option value="pt-BR" lang="pt-BR">Português (Brasil)</option>');
    expect(page).toContain('<button type="submit" class="secondary">تغيير اللغة</button>');
    // The error page too.
    const error = (await t.app.inject({ url: '/error', headers: { 'accept-language': 'es-MX,es;q=0.9' } })).body;
    expect(error).toContain('<html lang="es" dir="ltr">');
    expect(error).toContain('Algo ha salido mal');
    expect(error).toContain('<select id="language-choice" name="locale">');
  });

  it('switching keeps the flow: back to the same page and query, ui_locales rewritten, the choice in a cookie', async () => {
    const client = await makeClient(t, { name: 'Acme Notes' });
    const b = new Browser(t.app);
    const start = await b.get(authorizeUrl(client, { extra: { ui_locales: 'fr' } }).url);
    const login = await b.get(String(start.headers.location));
    expect(login.body).toContain('<html lang="fr"');
    const back = switcherBack(login.body)!;
    expect(back).toContain(`client_id=${client.app.id}`);
    const switched = await b.post('/language', { csrf: csrfOf(login.body), locale: 'es', back });
    expect(switched.statusCode).toBe(303);
    const location = String(switched.headers.location);
    expect(location).toBe(back.replace('ui_locales=fr', 'ui_locales=es'));
    expect(String(switched.headers['set-cookie'])).toMatch(/gh_locale=es;.*HttpOnly/);
    const again = await b.get(location);
    expect(again.body).toContain('<html lang="es"');
    expect(again.body).toContain('para continuar en Acme Notes');
    // Without ui_locales, the cookie decides over Accept-Language.
    const plain = await b.get('/password/forgot', { 'accept-language': 'de' });
    expect(plain.body).toContain('<html lang="es"');
  });

  it('a signed-in person\u2019s choice is saved on the account and outranks the cookie and Accept-Language', async () => {
    const b = new Browser(t.app);
    const { email } = await b.register();
    const account = await b.get('/account');
    const res = await b.post('/language', { csrf: csrfOf(account.body), locale: 'ar', back: '/account' });
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/account');
    expect((await findUserByEmail(t.db, email))?.locale).toBe('ar');
    // Another browser, signed in as the same person, with another cookie and Accept-Language.
    const other = new Browser(t.app);
    await other.login(email);
    other.jar.cookies.set('gh_locale', 'es');
    const page = await other.get('/account', { 'accept-language': 'de' });
    expect(page.body).toContain('<html lang="ar" dir="rtl">');
    // ui_locales still wins.
    expect((await other.get('/account?ui_locales=ko')).body).toContain('<html lang="ko"');
  });

  it('attack: a cross-site form cannot change a signed-in person\u2019s language (CSRF), nor send them off-site', async () => {
    const b = new Browser(t.app);
    const { email } = await b.register();
    const forged = await b.post('/language', { locale: 'ar', back: '/account' });
    expect(forged.statusCode).toBe(403);
    expect(forged.headers['set-cookie'] ?? '').not.toContain('gh_locale');
    expect((await findUserByEmail(t.db, email))?.locale).toBeNull();
    const csrf = csrfOf((await b.get('/account')).body);
    for (const back of ['https://evil.example/', '//evil.example/', '/\\evil.example/']) {
      const res = await b.post('/language', { csrf, locale: 'es', back });
      expect(res.statusCode).toBe(303);
      expect(res.headers.location).toBe('/account');
    }
    // Without a session there is nothing to protect but the visitor's own cookie.
    const visitor = await t.app.inject({ method: 'POST', url: '/language', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'locale=ja&back=%2Flogin' });
    expect(visitor.statusCode).toBe(303);
    expect(visitor.headers.location).toBe('/login');
  });

  it('bad input: an unknown locale is a 400 and sets nothing', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/language', headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: 'locale=xx&back=%2Flogin' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['set-cookie'] ?? '').not.toContain('gh_locale');
  });

  it("an app's default_locale (developer API) is used when nothing else chooses, below Accept-Language", async () => {
    const dev = await createDeveloperViaApi(t);
    const headers = bearer(dev.apiKey);
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers, payload: appBody({ default_locale: 'pt-BR' }) });
    expect(created.statusCode).toBe(201);
    expect(created.json().default_locale).toBe('pt-BR');
    const id = created.json().id as string;
    const bad = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers, payload: { default_locale: 'pt-PT' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().code).toBe('invalid_request');
    const patched = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers, payload: { default_locale: 'ar' } });
    expect(patched.json().default_locale).toBe('ar');
    const app = (await findApp(t.db, id))!;
    const b = new Browser(t.app);
    const login = await b.get(String((await b.get(authorizeUrl({ app }, { redirectUri: 'https://a.example/cb' }).url)).headers.location));
    expect(login.body).toContain('<html lang="ar" dir="rtl">');
    const b2 = new Browser(t.app);
    const withHeader = await b2.get(String((await b2.get(authorizeUrl({ app }, { redirectUri: 'https://a.example/cb' }).url)).headers.location), { 'accept-language': 'ja' });
    expect(withHeader.body).toContain('<html lang="ja"');
    const cleared = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers, payload: { default_locale: null } });
    expect(cleared.json().default_locale).toBeNull();
  });

  it('the error page shows the translated message, and outside production the English reason marked as English', async () => {
    const client = await makeClient(t);
    const res = await t.app.inject(authorizeUrl(client, { redirectUri: 'https://app.example/elsewhere', extra: { ui_locales: 'es' } }).url);
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('El redirect_uri no está registrado para esta aplicación.');
    expect(res.body).toMatch(/<span lang="en" dir="ltr">The redirect_uri is not one of this app/);
    expect(res.body).toContain('redirect_uri rechazado:');
  });
});
