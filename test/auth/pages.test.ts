import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';

let t: TestApp;

beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0' } });
});
afterAll(async () => t.close());

/** A tiny cookie-keeping browser over inject. */
function browser() {
  let cookie = '';
  const keep = (res: { headers: Record<string, unknown> }) => {
    const set = res.headers['set-cookie'];
    const first = (Array.isArray(set) ? set : set ? [set] : []).map(String).find((c) => c.startsWith('gh_sid='));
    if (first) cookie = first.split(';')[0]!;
  };
  return {
    async get(url: string) {
      const res = await t.app.inject({ method: 'GET', url, headers: cookie ? { cookie } : {} });
      keep(res);
      return res;
    },
    async post(url: string, form: Record<string, string>) {
      const res = await t.app.inject({ method: 'POST', url, payload: new URLSearchParams(form).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded', ...(cookie ? { cookie } : {}) } });
      keep(res);
      return res;
    },
  };
}
const csrfOf = (html: string) => /name="csrf" value="([^"]+)"/.exec(html)![1]!;

async function latestMail(to: string, kind: string) {
  await expect.poll(async () => (await t.app.inject({ method: 'GET', url: '/dev/mailbox', headers: { accept: 'application/json' } })).json().items.filter((m: { to: string; kind: string }) => m.to === to && m.kind === kind).length, { timeout: 5000 }).toBeGreaterThan(0);
  const items = (await t.app.inject({ method: 'GET', url: '/dev/mailbox', headers: { accept: 'application/json' } })).json().items as Array<{ to: string; kind: string; text: string }>;
  return items.find((m) => m.to === to && m.kind === kind)!;
}

describe('hosted magic-link, password and verify-email pages', () => {
  it('the landing page GET never consumes; the CSRF-bound POST signs the browser in once', async () => {
    const user = await makeUser(t.app, { email: 'page-magic@example.com', password: 'page magic passphrase' });
    const b = browser();
    const form = await b.get('/magic-link/request');
    expect(form.statusCode).toBe(200);
    const sent = await b.post('/magic-link/request', { csrf: csrfOf(form.body), email: user.email, action: 'send_magic_link' });
    expect(sent.statusCode).toBe(200);
    const mail = await latestMail(user.email, 'magic_link');
    const token = /token=(ml_[\w-]+)/.exec(mail.text)![1]!;

    // A mail scanner: GET ten times without cookies.
    for (let i = 0; i < 10; i++) {
      const scan = await t.app.inject({ method: 'GET', url: `/magic-link?token=${token}` });
      expect(scan.statusCode).toBe(200);
      expect(scan.body).toContain('value="use_magic_link"');
      expect(scan.headers['referrer-policy']).toBe('no-referrer');
    }
    const head = await t.app.inject({ method: 'HEAD', url: `/magic-link?token=${token}` });
    expect(head.statusCode).toBe(200);

    const victim = browser();
    const landing = await victim.get(`/magic-link?token=${token}`);
    const noCsrf = await victim.post('/magic-link', { token, action: 'use_magic_link' });
    expect(noCsrf.statusCode).toBe(403);
    const ok = await victim.post('/magic-link', { csrf: csrfOf(landing.body), token, action: 'use_magic_link' });
    expect(ok.statusCode).toBe(303);
    expect(ok.headers.location).toBe('/account');
    const session = await t.db.selectFrom('browser_sessions').select(['user_id']).where('user_id', '=', user.id).execute();
    expect(session).toHaveLength(1);

    const again = browser();
    const page = await again.get(`/magic-link?token=${token}`);
    const second = await again.post('/magic-link', { csrf: csrfOf(page.body), token, action: 'use_magic_link' });
    expect(second.statusCode).toBe(400);
  });

  it('forgot → reset page sets the new password without signing in, and the old link dies', async () => {
    const user = await makeUser(t.app, { email: 'page-reset@example.com', password: 'page reset old pass' });
    const b = browser();
    const form = await b.get('/password/forgot');
    const unknown = await b.post('/password/forgot', { csrf: csrfOf(form.body), email: 'nobody-here@example.com', action: 'reset' });
    const known = await b.post('/password/forgot', { csrf: csrfOf(form.body), email: user.email, action: 'reset' });
    expect(known.statusCode).toBe(200);
    expect(unknown.body.replace(/value="[^"]+"/g, '')).toBe(known.body.replace(/value="[^"]+"/g, ''));
    const mail = await latestMail(user.email, 'reset');
    const token = /token=(pr_[\w-]+)/.exec(mail.text)![1]!;
    const page = await b.get(`/password/reset?token=${token}`);
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('name="new_password"');
    const weak = await b.post('/password/reset', { csrf: csrfOf(page.body), token, new_password: 'password', action: 'reset' });
    expect(weak.statusCode).toBe(400);
    const done = await b.post('/password/reset', { csrf: csrfOf(page.body), token, new_password: 'page reset new pass', action: 'reset' });
    expect(done.statusCode).toBe(200);
    expect(done.headers['set-cookie'] ?? '').not.toContain('gh_sid=bs_');
    expect((await b.get(`/password/reset?token=${token}`)).statusCode).toBe(400);
    const signedIn = await t.db.selectFrom('browser_sessions').select('user_id').where('user_id', '=', user.id).execute();
    expect(signedIn).toHaveLength(0);
  });

  it('verify-email confirms the signed-in user with a mailed code', async () => {
    const user = await makeUser(t.app, { email: 'page-verify@example.com', password: 'page verify passphrase' });
    const b = browser();
    const landing = await b.get('/magic-link/request');
    await b.post('/magic-link/request', { csrf: csrfOf(landing.body), email: user.email, action: 'send_magic_link' });
    const mail = await latestMail(user.email, 'magic_link');
    const code = /\b(\d{6})\b/.exec(mail.text)![1]!;
    const codePage = await b.get('/magic-link');
    const signIn = await b.post('/magic-link', { csrf: csrfOf(codePage.body), email: user.email, code, action: 'use_magic_link' });
    expect(signIn.statusCode).toBe(303);
    // Magic-link sign-in proves the mailbox: already verified.
    const page = await b.get('/verify-email');
    expect(page.body).toContain(user.email);
    await t.db.updateTable('users').set({ email_verified: 0 }).where('id', '=', user.id).execute();
    const form = await b.get('/verify-email');
    const send = await b.post('/verify-email', { csrf: csrfOf(form.body), action: 'send_code' });
    expect(send.statusCode).toBe(200);
    const verifyMail = await latestMail(user.email, 'verify');
    const vcode = /\b(\d{6})\b/.exec(verifyMail.text)![1]!;
    const ok = await b.post('/verify-email', { csrf: csrfOf(form.body), code: vcode, action: 'verify' });
    expect(ok.statusCode).toBe(200);
    expect((await t.db.selectFrom('users').select('email_verified').where('id', '=', user.id).executeTakeFirstOrThrow()).email_verified).toBe(1);
  });
});
