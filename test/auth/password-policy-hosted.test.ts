import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeUrl, Browser, csrfOf, makeClient, relative, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';

// docs/guides/password-policy.md: the hosted doors show the rules of the policy that applies before the
// person types, and refuse under it with the reason in the page's language.
let t: TestApp;
let smtp: TestSmtp;
let strict: TestClient;

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '100' } });
  strict = await makeClient(t, { passwordPolicy: { minLength: 12, characterClasses: 0, maxAgeDays: 30, historyCount: 3 } });
});
afterAll(async () => {
  await t.close();
  await smtp.close();
});

/** The `<input>` of a field, and whether the page describes it with its hint. */
function inputTag(html: string, name: string): string {
  const m = new RegExp(`<input[^>]*name="${name}"[^>]*>`).exec(html);
  if (!m) throw new Error(`no input ${name} in page`);
  return m[0];
}

/** The text next to a field: its hint and its error (if any). */
const fieldError = (html: string, id: string) => /<p class="field-error" id="([^"]+)-error">([^<]*)<\/p>/.exec(html.slice(html.indexOf(`id="${id}"`)))?.[2];

/** A browser in the middle of an authorization request of `client` (the hosted pages carry `?client_id`). */
async function inFlow(client: TestClient): Promise<Browser> {
  const b = new Browser(t.app);
  const res = await b.get(authorizeUrl(client).url);
  expect(relative(String(res.headers.location))).toMatch(/^\/login\?/);
  return b;
}

describe('hosted registration', () => {
  it('shows the app rules before typing and refuses a too-short and a breached password under them', async () => {
    const b = await inFlow(strict);
    const page = await b.get(`/register?client_id=${strict.app.id}`);
    expect(inputTag(page.body, 'password')).toMatch(/minlength="12"/);
    expect(inputTag(page.body, 'password')).toMatch(/aria-describedby="password-hint"/);
    expect(page.body).toContain('At least 12 characters.');

    const email = uniqueEmail('hreg');
    const post = (password: string) => b.post(`/register?client_id=${strict.app.id}`, { csrf: csrfOf(page.body), email, password, name: 'A', accept_terms: '1', action: 'register' });
    const short = await post('violin harb');
    expect(short.statusCode).toBe(400);
    expect(fieldError(short.body, 'password')).toBe('This password is too short: use at least 12 characters.');
    expect(inputTag(short.body, 'password')).toMatch(/aria-describedby="password-hint password-error"/);
    const breached = await post('password1234');
    expect(breached.statusCode).toBe(400);
    expect(fieldError(breached.body, 'password')).toMatch(/common or breached passwords/);
    // Nothing was created.
    expect(await t.db.selectFrom('users').select('id').where('email', '=', email).executeTakeFirst()).toBeUndefined();
    // The same page without the flow: the platform default.
    expect(inputTag((await new Browser(t.app).get('/register')).body, 'password')).toMatch(/minlength="8"/);
  });

  it('says why in every language (German shown)', async () => {
    const b = await inFlow(strict);
    const url = `/register?client_id=${strict.app.id}&ui_locales=de`;
    const page = await b.get(url);
    expect(page.body).toContain('Mindestens 12 Zeichen.');
    const res = await b.post(url, { csrf: csrfOf(page.body), email: uniqueEmail('hde'), password: 'violin harb', name: 'A', accept_terms: '1', action: 'register' });
    expect(fieldError(res.body, 'password')).toBe('Dieses Passwort ist zu kurz: Verwenden Sie mindestens 12 Zeichen.');
    const breached = await b.post(url, { csrf: csrfOf(page.body), email: uniqueEmail('hde'), password: 'password1234', name: 'A', accept_terms: '1', action: 'register' });
    expect(fieldError(breached.body, 'password')).toMatch(/kompromittierter Passwörter/);
  });
});

describe('hosted reset', () => {
  /** Asks for a reset on the hosted forgot page (in the app's flow when `client` is given) and opens the mailed link. */
  async function resetLink(b: Browser, email: string, client?: TestClient): Promise<string> {
    const carried = client ? `?client_id=${client.app.id}` : '';
    const form = await b.get(`/password/forgot${carried}`);
    const before = new Set(smtp.mails);
    await b.post(`/password/forgot${carried}`, { csrf: csrfOf(form.body), email, action: 'reset' });
    const mail = await smtp.waitFor((m) => mailTo(m) === email && !before.has(m));
    return relative(linkIn(mail));
  }

  it('a link asked in the app flow shows and applies its policy: too short, then reuse refused; a good one accepted', async () => {
    const user = await makeUser(t.app, { email: uniqueEmail('hreset'), password: 'Original pass 111!' });
    const b = await inFlow(strict);
    const link = await resetLink(b, user.email, strict);
    const page = await b.get(link);
    expect(page.statusCode).toBe(200);
    expect(inputTag(page.body, 'new_password')).toMatch(/minlength="12"/);
    expect(inputTag(page.body, 'new_password')).toMatch(/aria-describedby="new_password-hint"/);
    expect(page.body).toContain('At least 12 characters.');
    const token = /name="token" value="([^"]+)"/.exec(page.body)![1]!;
    const post = (password: string) => b.post('/password/reset', { csrf: csrfOf(page.body), token, new_password: password, action: 'reset' });

    const short = await post('Violin harb');
    expect(short.statusCode).toBe(400);
    expect(fieldError(short.body, 'new_password')).toBe('This password is too short: use at least 12 characters.');
    const reused = await post(user.password);
    expect(reused.statusCode).toBe(400);
    expect(fieldError(reused.body, 'new_password')).toBe('You have used this password before. Choose a new one.');
    const breached = await post('password1234');
    expect(fieldError(breached.body, 'new_password')).toMatch(/common or breached/);
    // The refusals did not use up the link.
    const ok = await post('Second pass 2222!');
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toContain('role="status"');
  });

  it('a link asked outside any flow shows and applies the platform default', async () => {
    const user = await makeUser(t.app, { email: uniqueEmail('hreset'), password: 'Original pass 111!' });
    const b = new Browser(t.app);
    const page = await b.get(await resetLink(b, user.email));
    expect(inputTag(page.body, 'new_password')).toMatch(/minlength="8"/);
    expect(page.body).toContain('At least 8 characters.');
    const token = /name="token" value="([^"]+)"/.exec(page.body)![1]!;
    // Eleven characters: too short for the strict app, enough for the default.
    const res = await b.post('/password/reset', { csrf: csrfOf(page.body), token, new_password: 'Violin harb', action: 'reset' });
    expect(res.statusCode).toBe(200);
  });
});

describe('hosted reset of a link asked over REST', () => {
  it('naming the app without a redirect_uri: the hosted page applies its policy', async () => {
    const user = await makeUser(t.app, { email: uniqueEmail('hrest'), password: 'Original pass 111!' });
    const before = new Set(smtp.mails);
    const asked = await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email: user.email, client_id: strict.app.id }, headers: { 'x-forwarded-for': '1.1.1.3' } });
    expect(asked.statusCode).toBe(202);
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email && !before.has(m));
    const b = new Browser(t.app);
    const page = await b.get(relative(linkIn(mail)));
    expect(inputTag(page.body, 'new_password')).toMatch(/minlength="12"/);
    const token = /name="token" value="([^"]+)"/.exec(page.body)![1]!;
    const res = await b.post('/password/reset', { csrf: csrfOf(page.body), token, new_password: 'Violin harb', action: 'reset' });
    expect(fieldError(res.body, 'new_password')).toBe('This password is too short: use at least 12 characters.');
  });
});

describe('account page change', () => {
  it('shows the platform rules and refuses a breached password', async () => {
    const user = await makeUser(t.app, { email: uniqueEmail('hacct') });
    const b = new Browser(t.app);
    const login = await b.get('/account');
    await b.post('/account', { csrf: csrfOf(login.body), action: 'login', email: user.email, password: user.password });
    const page = await b.get('/account');
    expect(inputTag(page.body, 'new_password')).toMatch(/minlength="8"/);
    expect(inputTag(page.body, 'new_password')).toMatch(/aria-describedby="new_password-hint"/);
    expect(page.body).toContain('At least 8 characters.');
    const before = (await t.db.selectFrom('users').select('password_hash').where('id', '=', user.id).executeTakeFirstOrThrow()).password_hash;
    const res = await b.post('/account/password?ui_locales=fr', { csrf: csrfOf(page.body), password: user.password, new_password: 'password1234', action: 'save' });
    expect(res.statusCode).toBe(400);
    expect(fieldError(res.body, 'new_password')).toBe('Ce mot de passe figure sur une liste de mots de passe courants ou divulgués. Choisissez-en un autre.');
    expect((await t.db.selectFrom('users').select('password_hash').where('id', '=', user.id).executeTakeFirstOrThrow()).password_hash).toBe(before);
  });
});

describe('hosted sign-in with an expired password', () => {
  it('asks for a new one under the app rules, refuses a short one, accepts a good one', async () => {
    const user = await makeUser(t.app, { email: uniqueEmail('hexp'), password: 'Aged password 111!' });
    t.clock.advance(31 * 86400);
    try {
      const b = await inFlow(strict);
      const url = `/login?client_id=${strict.app.id}`;
      const page = await b.get(url);
      const expired = await b.post(url, { csrf: csrfOf(page.body), email: user.email, password: user.password, action: 'login' });
      expect(expired.statusCode).toBe(403);
      expect(expired.body).toContain('Your password for this app has expired.');
      expect(inputTag(expired.body, 'new_password')).toMatch(/minlength="12"/);
      expect(inputTag(expired.body, 'new_password')).toMatch(/aria-describedby="new_password-hint"/);

      const short = await b.post(url, { csrf: csrfOf(expired.body), email: user.email, password: user.password, new_password: 'Violin harb', action: 'login' });
      expect(short.statusCode).toBe(400);
      expect(fieldError(short.body, 'new_password')).toBe('This password is too short: use at least 12 characters.');
      const same = await b.post(url, { csrf: csrfOf(short.body), email: user.email, password: user.password, new_password: user.password, action: 'login' });
      expect(fieldError(same.body, 'new_password')).toBe('You have used this password before. Choose a new one.');

      const ok = await b.post(url, { csrf: csrfOf(same.body), email: user.email, password: user.password, new_password: 'Fresh pass 33333!', action: 'login' });
      expect(ok.statusCode, ok.body.slice(0, 300)).toBe(303);
      // The new password signs in now; the old one no longer does.
      const again = await inFlow(strict);
      const p2 = await again.get(url);
      expect((await again.post(url, { csrf: csrfOf(p2.body), email: user.email, password: 'Fresh pass 33333!', action: 'login' })).statusCode).toBe(303);
    } finally {
      t.clock.advance(-31 * 86400);
    }
  });
});
