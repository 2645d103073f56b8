import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findApp } from '../../src/storage/repos/apps.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders, appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeAndGetCode, authorizeUrl, Browser, csrfOf, makeClient, relative, uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * The hosted pages' finish (issue 15), black box through HTTP: per-field errors (`aria-invalid`,
 * `aria-describedby`, `autofocus`), per-app branding set through the developer API, the favicon, the
 * language of mails and of the error page, the account page, the lockout message, the dev mailbox.
 */

/** The `<input>` tag named `name` in a page. */
function inputTag(html: string, name: string): string {
  const tag = new RegExp(`<input[^>]*\\bname="${name}"[^>]*>`).exec(html)?.[0];
  if (!tag) throw new Error(`no input ${name} in ${html.slice(0, 2000)}`);
  return tag;
}

/** Asserts the field is marked invalid, described by its error (which says `message`), and focused. */
function expectFieldError(html: string, name: string, message: RegExp, options: { focused?: boolean } = {}) {
  const tag = inputTag(html, name);
  expect(tag).toContain('aria-invalid="true"');
  const describedBy = /aria-describedby="([^"]+)"/.exec(tag)?.[1] ?? '';
  const errorId = describedBy.split(' ').find((id) => id.endsWith('-error'));
  expect(errorId, `${name} is described by its error`).toBeTruthy();
  const error = new RegExp(`<p class="field-error" id="${errorId}">([^<]*)</p>`).exec(html)?.[1];
  expect(error).toMatch(message);
  if (options.focused !== false) expect(tag).toContain('autofocus');
}

const autofocusCount = (html: string) => (html.match(/\bautofocus\b/g) ?? []).length;

describe('hosted pages: per-field errors', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000' } });
    // Published platform terms make registration ask for `accept_terms`.
    await t.app.inject({ method: 'PUT', url: '/v1/admin/legal/terms?lang=en', headers: adminHeaders, payload: { title: 'Terms', content: 'Be nice.' } });
  });
  afterAll(async () => t.close());

  it('login: empty fields are each marked, the first focused; wrong credentials are a form message', async () => {
    const b = new Browser(t.app);
    const empty = await b.submit('/login', { email: '', password: '', action: 'login' });
    expect(empty.statusCode).toBe(400);
    expectFieldError(empty.body, 'email', /email address/);
    expectFieldError(empty.body, 'password', /password/, { focused: false });
    expect(autofocusCount(empty.body)).toBe(1);
    const wrong = await b.submit('/login', { email: 'nobody@example.com', password: 'not the password', action: 'login' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toMatch(/<div class="error-box" role="alert" id="form-error"><p>The email or password is incorrect.<\/p>/);
    expect(inputTag(wrong.body, 'email')).not.toContain('aria-invalid');
    expect(inputTag(wrong.body, 'password')).toContain('autofocus');
  });

  it('register: missing email, password and terms are marked at their fields', async () => {
    const b = new Browser(t.app);
    const res = await b.submit('/register', { email: '', password: '', name: 'A', action: 'register' });
    expect(res.statusCode).toBe(400);
    expectFieldError(res.body, 'email', /email address/);
    expectFieldError(res.body, 'password', /password/, { focused: false });
    expectFieldError(res.body, 'accept_terms', /.+/, { focused: false });
    // The password hint stays described next to its error.
    expect(inputTag(res.body, 'password')).toMatch(/aria-describedby="password-hint password-error"/);
    const weak = await b.submit('/register', { email: uniqueEmail(), password: 'short', accept_terms: '1', action: 'register' });
    expect(weak.statusCode).toBe(400);
    expectFieldError(weak.body, 'password', /too short: use at least 8 characters/);
    const taken = await makeUser(t.app);
    const dup = await b.submit('/register', { email: taken.email, password: 'a long enough passphrase 77', accept_terms: '1', action: 'register' });
    expect(dup.statusCode).toBe(409);
    expectFieldError(dup.body, 'email', /already exists/);
  });

  it('magic link, forgot and reset: a real message at the field (never the label "Email")', async () => {
    const b = new Browser(t.app);
    const empty = await b.submit('/magic-link/request', { email: '', action: 'send_magic_link' });
    expect(empty.statusCode).toBe(400);
    expectFieldError(empty.body, 'email', /^Enter your email address\.$/);
    const bad = await b.submit('/password/forgot', { email: 'not-an-address', action: 'reset' });
    expect(bad.statusCode).toBe(400);
    expectFieldError(bad.body, 'email', /valid email address/);
    const code = await b.submit('/magic-link', { email: 'someone@example.com', code: '', action: 'use_magic_link' });
    expect(code.statusCode).toBe(400);
    expectFieldError(code.body, 'code', /6-digit code/);
  });

  it('profile completion: a malformed phone number is marked at its field', async () => {
    const client = await makeClient(t, { requiredFields: ['phone_number'] });
    const b = new Browser(t.app);
    expect((await b.submit('/register', { email: uniqueEmail(), password: 'a long enough passphrase 77', accept_terms: '1', action: 'register' })).statusCode).toBe(303);
    const start = await b.get(authorizeUrl(client).url);
    const consented = await b.submit(relative(String(start.headers.location)), { action: 'allow' });
    expect((await b.get(String(consented.headers.location))).headers.location).toMatch(/\/profile\b/);
    const page = await b.get('/profile');
    expect(page.statusCode).toBe(200);
    const refused = await b.post('/profile', { csrf: csrfOf(page.body), phone_number: '12345', action: 'save' });
    expect(refused.statusCode).toBe(400);
    expectFieldError(refused.body, 'phone_number', /international format/);
    expect(inputTag(refused.body, 'phone_number')).toMatch(/aria-describedby="phone_number-hint phone_number-error"/);
  });

  it('a stale /profile or /consent is no dead end: a member of the app its URL names gets a way back to the app; anyone else only the account page', async () => {
    const client = await makeClient(t, { name: 'Field Notes', redirectUris: ['https://notes.example/cb'], requiredFields: ['phone_number'] });
    const b = new Browser(t.app);
    expect((await b.submit('/register', { email: uniqueEmail(), password: 'a long enough passphrase 77', accept_terms: '1', action: 'register' })).statusCode).toBe(303);
    const start = await b.get(authorizeUrl(client).url);
    const consented = await b.submit(relative(String(start.headers.location)), { action: 'allow' });
    const profileUrl = relative(String((await b.get(String(consented.headers.location))).headers.location));
    expect(profileUrl).toMatch(/^\/profile\?client_id=/);
    const page = await b.get(profileUrl);
    const saved = await b.post('/profile', { csrf: csrfOf(page.body), phone_number: '+14155550123', action: 'save' });
    expect(saved.statusCode).toBe(303);
    // The flow resumes and returns to the app, signed in: the person is now the app's member.
    expect(String((await b.get(relative(String(saved.headers.location)))).headers.location)).toMatch(/^https:\/\/notes\.example\/cb\?code=/);
    // The same page again (back button, reload): the step is done.
    for (const path of [profileUrl, profileUrl.replace('/profile', '/consent')]) {
      const stale = await b.get(path);
      expect(stale.statusCode).toBe(400);
      expect(stale.body).toContain('<a class="button secondary" href="https://notes.example/" data-back-to-app>← Back to Field Notes</a>');
      expect(stale.body).toContain('href="/account"');
    }
    // Someone who is not the app's member (here: signed out) is shown neither its name nor a link of its choosing.
    const visitor = await new Browser(t.app).get(profileUrl);
    expect(visitor.statusCode).toBe(400);
    expect(visitor.body).not.toContain('data-back-to-app');
    expect(visitor.body).not.toContain('Field Notes');
  });

  it('account: a wrong current password is marked at that field (403)', async () => {
    const user = await makeUser(t.app);
    const b = new Browser(t.app);
    expect((await b.submit('/account', { email: user.email, password: user.password, action: 'login' })).statusCode).toBe(303);
    const page = await b.get('/account');
    const res = await b.post('/account/password', { csrf: csrfOf(page.body), password: 'wrong current password', new_password: 'another long passphrase 9', action: 'save' });
    expect(res.statusCode).toBe(403);
    expectFieldError(res.body, 'password', /current password/);
  });
});

describe('hosted pages: lockout', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000', LOGIN_MAX_FAILURES: '2', LOGIN_LOCK_SECONDS: '900' } });
  });
  afterAll(async () => t.close());

  it('says how long the lock lasts and offers a magic link and a reset', async () => {
    const user = await makeUser(t.app);
    const b = new Browser(t.app);
    for (let i = 0; i < 2; i++) expect((await b.login(user.email, 'wrong password here')).statusCode).toBe(401);
    const locked = await b.login(user.email, 'wrong password here');
    expect(locked.statusCode).toBe(429);
    expect(Number(locked.headers['retry-after'])).toBeGreaterThan(800);
    expect(locked.body).toContain('Too many attempts. Try again in 15 minutes.');
    expect(locked.body).toMatch(/<ul class="help"><li><a href="\/magic-link\/request">[^<]+<\/a><\/li><li><a href="\/password\/forgot">/);
    t.clock.advance(600);
    const later = await new Browser(t.app).submit('/login', { email: user.email, password: user.password, action: 'login', ui_locales: 'zh-CN' });
    expect(later.statusCode).toBe(429);
    expect(later.body).toContain('5 分钟');
  });
});

describe('hosted pages: branding, favicon, languages, account, mailbox', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  it('branding: the apps API validates logo_url and accent_color (400, nothing changed) and shows them on that app only', async () => {
    const dev = await createDeveloperViaApi(t);
    const headers = bearer(dev.apiKey);
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers, payload: appBody({ logo_url: 'https://cdn.example/logo.svg', accent_color: '#FFD400' }) });
    expect(created.statusCode).toBe(201);
    const app = created.json();
    expect(app).toMatchObject({ logo_url: 'https://cdn.example/logo.svg', accent_color: '#ffd400' });
    for (const bad of [
      { logo_url: 'http://cdn.example/logo.svg' },
      { logo_url: 'javascript:alert(1)' },
      { logo_url: 'https://user:pw@cdn.example/logo.svg' },
      { logo_url: `https://cdn.example/${'a'.repeat(2100)}` },
      { logo_url_dark: 'http://cdn.example/logo-dark.svg' },
      { logo_url_dark: 'javascript:alert(1)' },
      { accent_color: 'red' },
      { accent_color: '#12345' },
      { accent_color: '#123456;}body{display:none' },
    ]) {
      const res = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}`, headers, payload: bad });
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    const bad = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers, payload: appBody({ accent_color: 'blue' }) });
    expect(bad.statusCode).toBe(400);
    const unchanged = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${app.id}`, headers });
    expect(unchanged.json()).toMatchObject({ logo_url: 'https://cdn.example/logo.svg', accent_color: '#ffd400' });

    // The hosted login of that app shows its logo and links its accent stylesheet.
    const b = new Browser(t.app);
    const start = await b.get(authorizeUrl({ app: (await findApp(t.db, app.id))! }).url);
    const login = await b.get(String(start.headers.location));
    expect(login.body).toContain('<img class="logo" src="https://cdn.example/logo.svg" alt="My app" data-brand-logo>');
    const sheet = /<link rel="stylesheet" href="(\/assets\/brand\/[^"]+)">/.exec(login.body)?.[1];
    expect(sheet).toBeTruthy();
    expect(login.headers['content-security-policy']).toMatch(/img-src [^;]*https:/);
    const css = await t.app.inject({ method: 'GET', url: sheet!.replace(/&amp;/g, '&') });
    expect(css.statusCode).toBe(200);
    expect(css.headers['content-type']).toContain('text/css');
    // Buttons in the accent with black text; links and focus rings darkened to read on the light card, as they are on the dark one.
    expect(css.body).toBe(':root { --accent: #ffd400; --accent-contrast: #000000; --link: #8c7500; --focus: #a68a00; }\n@media (prefers-color-scheme: dark) { :root { --accent: #ffd400; --accent-contrast: #000000; --link: #ffd400; --focus: #ffd400; } }\n');

    // A logo for dark mode: the page offers it to devices in the dark scheme.
    expect(login.body).not.toContain('data-brand-logo-dark');
    const dark = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}`, headers, payload: { logo_url_dark: 'https://cdn.example/logo-dark.svg' } });
    expect(dark.json()).toMatchObject({ logo_url: 'https://cdn.example/logo.svg', logo_url_dark: 'https://cdn.example/logo-dark.svg' });
    const b3 = new Browser(t.app);
    const darkLogin = await b3.get(String((await b3.get(authorizeUrl({ app: (await findApp(t.db, app.id))! }).url)).headers.location));
    expect(darkLogin.body).toContain('<source media="(prefers-color-scheme: dark)" srcset="https://cdn.example/logo-dark.svg" data-brand-logo-dark>');

    // Another app's sign-in, and a page with no sign-in in flight, show the default look.
    const other = await makeClient(t);
    const b2 = new Browser(t.app);
    const otherLogin = await b2.get(String((await b2.get(authorizeUrl(other).url)).headers.location));
    expect(otherLogin.body).not.toContain('data-brand-logo');
    expect(otherLogin.body).not.toContain('/assets/brand/');
    expect((await new Browser(t.app).get('/login')).body).not.toContain('data-brand-logo');

    // null removes the branding.
    const cleared = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}`, headers, payload: { logo_url: null, accent_color: null } });
    expect(cleared.json()).toMatchObject({ logo_url: null, accent_color: null });
    expect((await t.app.inject({ method: 'GET', url: sheet!.replace(/&amp;/g, '&') })).statusCode).toBe(404);
  });

  it('favicon: served as SVG and linked from every page', async () => {
    for (const url of ['/favicon.svg', '/favicon.ico']) {
      const res = await t.app.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-type']).toContain('image/svg+xml');
      expect(res.body).toContain('<svg');
    }
    expect((await t.app.inject({ method: 'GET', url: '/login' })).body).toContain('<link rel="icon" href="/favicon.svg" type="image/svg+xml">');
  });

  it('a zh-CN registration mails its verification code in Chinese (subject and <title> filled in)', async () => {
    const email = uniqueEmail('zh');
    const b = new Browser(t.app);
    const page = await b.get('/register?ui_locales=zh-CN');
    const res = await b.post('/register?ui_locales=zh-CN', { csrf: csrfOf(page.body), email, password: 'a long enough passphrase 77', action: 'register' });
    expect(res.statusCode).toBe(303);
    const mailbox = await t.app.inject({ method: 'GET', url: `/dev/mailbox?to=${encodeURIComponent(email)}`, headers: { accept: 'application/json' } });
    const [mail] = mailbox.json().items as Array<{ subject: string; html: string; text: string }>;
    const code = /\b(\d{6})\b/.exec(mail!.text)![1]!;
    expect(mail!.subject).toBe(`你的验证码：${code}`);
    expect(mail!.html).toContain(`<title>你的验证码：${code}</title>`);
    expect(mail!.html).not.toContain('{code}');
  });

  it('the zh-CN error page shows the translated message, and a way on', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/consent', headers: { 'accept-language': 'zh-CN,zh;q=0.9' } });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('此登录请求已过期。请返回应用重新开始。');
    expect(res.body).toContain('<html lang="zh-CN" dir="ltr">');
    expect(res.body).toContain('<a class="button secondary" href="/account">前往你的账号</a>');
  });

  it('/account: email and its status, local dates, app names, no provider section, a way back to the app', async () => {
    const user = await makeUser(t.app, { email_verified: 0 });
    const client = await makeClient(t, { name: 'Photo Album', redirectUris: ['https://photos.example/cb'] });
    const b = new Browser(t.app);
    expect((await b.submit('/account', { email: user.email, password: user.password, action: 'login' })).statusCode).toBe(303);
    // Sign in to the app once, so it is a connected app.
    await authorizeAndGetCode(b, client);
    const page = await b.get(`/account?client_id=${client.app.id}&ui_locales=zh-CN`);
    expect(page.body).toContain(`<span data-field="email">${user.email}</span>`);
    expect(page.body).toMatch(/data-field="email_verified">未验证<\/span> <a href="\/verify-email">/);
    expect(page.body).toContain('<strong>Photo Album</strong>');
    expect(page.body).not.toMatch(/<code>app_/);
    expect(page.body).not.toMatch(/\d{4}-\d\d-\d\dT\d\d:\d\d/); // no raw ISO timestamps
    expect(page.body).toMatch(/\d{4}年\d{1,2}月\d{1,2}日/);
    expect(page.body).not.toContain('身份提供方</h2>');
    expect(page.body).toContain('<a class="back" href="https://photos.example/" data-back-to-app>← 返回 Photo Album</a>');
    // Signing out is not a dead end: the page says so and offers the sign-in form.
    const res = await b.post('/account', { csrf: csrfOf(page.body), action: 'logout' });
    const out = await b.get(String(res.headers.location));
    expect(out.body).toContain('You are signed out.');
    expect(inputTag(out.body, 'password')).toBeTruthy();
  });

  it('dev mailbox: an HTML page framing each mail in a sandbox without scripts, filtered by ?to', async () => {
    const [a, b] = [uniqueEmail('box-a'), uniqueEmail('box-b')];
    for (const email of [a, b]) await new Browser(t.app).submit('/password/forgot', { email, action: 'reset' });
    await makeUser(t.app, { email: a });
    await new Browser(t.app).submit('/magic-link/request', { email: a, action: 'send_magic_link' });
    const page = await t.app.inject({ method: 'GET', url: `/dev/mailbox?to=${encodeURIComponent(a.toUpperCase())}`, headers: { accept: 'text/html' } });
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<meta name="viewport" content="width=device-width, initial-scale=1">');
    expect(page.body).not.toContain(b);
    const frames = page.body.match(/<iframe [^>]+>/g) ?? [];
    expect(frames.length).toBe(1); // the reset for an unknown address is a stand-in, never listed
    expect(frames[0]).toContain('sandbox="allow-popups allow-popups-to-escape-sandbox"');
    expect(frames[0]).not.toContain('allow-scripts');
    expect(page.headers['content-security-policy']).toContain("frame-src 'self'");
    expect(page.body).toMatch(/<a href="http:\/\/[^"]+\/magic-link\?token=ml_[^"]+" target="_blank" rel="noopener noreferrer">/);
    const frameUrl = /<iframe src="([^"]+)"/.exec(frames[0]!)![1]!;
    const mail = await t.app.inject({ method: 'GET', url: frameUrl });
    expect(mail.statusCode).toBe(200);
    expect(mail.headers['content-security-policy']).toMatch(/sandbox allow-popups allow-popups-to-escape-sandbox$/);
    expect(mail.headers['content-security-policy']).toContain("frame-ancestors 'self'");
    expect(mail.body).toContain('<base target="_blank">');
    expect((await t.app.inject({ method: 'GET', url: '/dev/mailbox/mail_unknown/html' })).statusCode).toBe(404);
  });
});

describe('hosted pages: the way through', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000' } });
  });
  afterAll(async () => t.close());

  it('the magic-link and forgot-password pages say which app they continue to, and the magic-link button says it sends mail', async () => {
    const shop = await makeClient(t, { name: 'Corner Shop' });
    const b = new Browser(t.app);
    const start = await b.get(authorizeUrl(shop).url);
    const login = relative(String(start.headers.location));
    const loginPage = await b.get(login);
    const magicHref = /action="(\/magic-link\/request[^"]*)"/.exec(loginPage.body)?.[1] ?? /formaction="(\/magic-link\/request[^"]*)"/.exec(loginPage.body)![1]!;
    const forgotHref = /href="(\/password\/forgot[^"]*)"/.exec(loginPage.body)![1]!;
    for (const href of [magicHref, forgotHref]) {
      const page = await b.get(href.replaceAll('&amp;', '&'));
      expect(page.statusCode).toBe(200);
      expect(page.body).toContain('to continue to Corner Shop');
    }
    const magic = await b.get(magicHref.replaceAll('&amp;', '&'));
    expect(magic.body).toMatch(/value="send_magic_link">Email me a sign-in link</);
  });

  /** The newest mail to `email` in the dev mailbox. */
  async function lastMail(email: string) {
    const mailbox = await t.app.inject({ method: 'GET', url: `/dev/mailbox?to=${encodeURIComponent(email)}`, headers: { accept: 'application/json' } });
    return (mailbox.json().items as Array<{ subject: string; html: string; text: string }>)[0]!;
  }

  it('the verification mail names the app and carries a link: its landing changes nothing, its button verifies the signed-in account, once', async () => {
    const shop = await makeClient(t, { name: 'Corner Shop' });
    const b = new Browser(t.app);
    const start = await b.get(authorizeUrl(shop).url);
    const register = relative(String(start.headers.location)).replace('/login', '/register');
    const email = uniqueEmail('link');
    expect((await b.submit(register, { email, password: 'a long enough passphrase 77', action: 'register' })).statusCode).toBe(303);
    const mail = await lastMail(email);
    expect(mail.text).toContain('for Corner Shop');
    const link = /(http:\/\/\S+\/verify-email\?token=ev_\S+)/.exec(mail.text)![1]!;
    const path = relative(link);
    const verified = async () => (await t.db.selectFrom('users').select('email_verified').where('email', '=', email).executeTakeFirstOrThrow()).email_verified;

    // A mail scanner (no session) opens the link: nothing changes, and it is told to sign in.
    const scanner = await new Browser(t.app).get(path);
    expect(scanner.statusCode).toBe(200);
    expect(scanner.body).not.toContain('value="confirm_link"');
    // The registered browser opens it: still nothing until the button.
    const landing = await b.get(path);
    expect(landing.body).toContain('value="confirm_link"');
    expect(await verified()).toBe(0);
    const confirmed = await b.post(path, { csrf: csrfOf(landing.body), token: new URL(link).searchParams.get('token')!, action: 'confirm_link' });
    expect(confirmed.statusCode).toBe(303); // on with the sign-in that was under way
    expect(await verified()).toBe(1);
    const again = await b.post(path, { csrf: csrfOf(landing.body), token: new URL(link).searchParams.get('token')!, action: 'confirm_link' });
    expect(again.statusCode).toBe(303); // already verified: nothing to do, on with the sign-in
  });

  it('right after registering, confirming the address is offered as a step that may wait: the code goes on with the sign-in, and so does "not now"', async () => {
    const shop = await makeClient(t, { name: 'Step Shop' });
    for (const how of ['code', 'later'] as const) {
      const b = new Browser(t.app);
      const start = await b.get(authorizeUrl(shop).url);
      const email = uniqueEmail(`step-${how}`);
      const registered = await b.submit(relative(String(start.headers.location)).replace('/login', '/register'), { email, password: 'a long enough passphrase 77', action: 'register' });
      expect(registered.headers.location).toBe('/verify-email?after=register');
      const step = await b.get('/verify-email?after=register');
      expect(step.body).toContain('Your account is ready');
      const later = /href="([^"]+)" data-verify-later/.exec(step.body)![1]!.replaceAll('&amp;', '&');
      expect(later).toMatch(/^\/oauth\/authorize\?/);
      if (how === 'later') {
        expect(relative(String((await b.get(later)).headers.location))).toMatch(/^\/consent/);
        continue;
      }
      const code = /\b(\d{6})\b/.exec((await lastMail(email)).text)![1]!;
      const verified = await b.post('/verify-email', { csrf: csrfOf(step.body), code, action: 'verify' });
      expect(verified.headers.location).toBe(later);
      expect((await t.db.selectFrom('users').select('email_verified').where('email', '=', email).executeTakeFirstOrThrow()).email_verified).toBe(1);
    }
  });

  it('mails for an app carry its logo and its accent on the button; mails for no app look like Gatehouse', async () => {
    const shop = await makeClient(t, { name: 'Green Shop', branding: { logoUrl: 'https://shop.example/logo.svg', logoUrlDark: null, accentColor: '#0a7f3f' } });
    const b = new Browser(t.app);
    const start = await b.get(authorizeUrl(shop).url);
    const email = uniqueEmail('brand');
    await b.submit(relative(String(start.headers.location)).replace('/login', '/register'), { email, password: 'a long enough passphrase 77', action: 'register' });
    const branded = await lastMail(email);
    expect(branded.html).toContain('<img src="https://shop.example/logo.svg" alt="Green Shop"');
    expect(branded.html).toContain('background:#0a7f3f;color:#ffffff;');
    const plainEmail = uniqueEmail('plain');
    await new Browser(t.app).register(plainEmail);
    const plain = await lastMail(plainEmail);
    expect(plain.html).not.toContain('<img');
    expect(plain.html).toContain('background:#2457d6;color:#ffffff;'); // the platform brand (docs/guides/app-mail.md#platform-mails)
  });

  it('a verification link confirms nothing for another account: the mailbox owner signed in elsewhere cannot verify a squatter\'s account', async () => {
    const victim = uniqueEmail('owner');
    const squatter = new Browser(t.app);
    await squatter.register(victim);
    const link = /(http:\/\/\S+\/verify-email\?token=ev_\S+)/.exec((await lastMail(victim)).text)![1]!;
    // The mailbox owner, signed in with an account of their own, clicks the mail's button.
    const owner = new Browser(t.app);
    await owner.register(uniqueEmail('owner-own'));
    const landing = await owner.get(relative(link));
    const res = await owner.post(relative(link), { csrf: csrfOf(landing.body), token: new URL(link).searchParams.get('token')!, action: 'confirm_link' });
    expect(res.statusCode).toBe(400);
    expect(res.body).toContain('not for the account you are signed in with');
    expect((await t.db.selectFrom('users').select('email_verified').where('email', '=', victim).executeTakeFirstOrThrow()).email_verified).toBe(0);
  });

  it('a signed-out account page offers the reset and registration links the login page has', async () => {
    const page = await new Browser(t.app).get('/account');
    expect(page.body).toContain('href="/password/forgot"');
    expect(page.body).toContain('href="/register"');
  });
});
