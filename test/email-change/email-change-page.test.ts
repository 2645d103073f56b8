import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeUser } from '../helpers/factories.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { Browser, csrfOf, relative, uniqueEmail } from '../helpers/oauth-flows.js';
import { codeIn, linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';

/**
 * Email change on the hosted account page (docs/account/email-change.md): the "Email address" section
 * asks for the new address and the current password, then the mailed code; the mailed link confirms
 * only in a browser signed in as the account. Black box, real SMTP, no script.
 */

let t: TestApp;
let smtp: TestSmtp;
const secrets: string[] = [];

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0' } });
});
afterAll(async () => {
  expectNoSecretsInLogs(t?.logs ?? [], secrets, 6);
  await t?.close();
  await smtp?.close();
});

const seen = new Set<ParsedMail>();
async function nextMailTo(to: string): Promise<ParsedMail> {
  const mail = await smtp.waitFor((m) => mailTo(m) === to && !seen.has(m));
  seen.add(mail);
  return mail;
}

async function signedIn() {
  const user = await makeUser(t.app, { email: uniqueEmail('page'), email_verified: 1 });
  secrets.push(user.password);
  const b = new Browser(t.app);
  const res = await b.submit('/account', { email: user.email, password: user.password, action: 'login' });
  expect(res.statusCode).toBe(303);
  return { b, user };
}

async function send(b: Browser, url: string, form: Record<string, string>) {
  const page = await b.get('/account');
  return b.post(url, { csrf: csrfOf(page.body), ...form });
}

const emailOf = async (id: string) => (await t.db.selectFrom('users').select(['email', 'email_verified']).where('id', '=', id).executeTakeFirstOrThrow());

describe('/account: Email address', () => {
  it('shows the address, its state and the change form; the code moves the account', async () => {
    const { b, user } = await signedIn();
    const page = await b.get('/account');
    expect(page.body).toContain('<h2 id="email">Email address</h2>');
    expect(page.body).toContain('name="new_email"');
    expect(page.body).toContain('name="current_password"');

    const to = uniqueEmail('moved');
    const asked = await send(b, '/account/email', { action: 'request', new_email: to, current_password: user.password });
    expect(asked.statusCode).toBe(303);
    const mail = await nextMailTo(to);
    const code = codeIn(mail);
    secrets.push(code, new URL(linkIn(mail)).searchParams.get('token')!);
    const pending = await b.get('/account');
    expect(pending.body).toContain('data-email-change-pending');
    expect(pending.body).toContain(to);

    const wrong = await send(b, '/account/email', { action: 'confirm', email_code: code === '000000' ? '111111' : '000000' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.body).toContain('attempts left');

    const done = await send(b, '/account/email', { action: 'confirm', email_code: code });
    expect(done.statusCode).toBe(303);
    expect(done.headers.location).toBe('/account?done=email#email');
    expect((await b.get('/account?done=email')).body).toContain(`Your email address is now ${to}.`);
    expect(await emailOf(user.id)).toEqual({ email: to, email_verified: 1 });
    expect((await nextMailTo(user.email)).subject).toBe('Your email address was changed');
  });

  it('the mailed link confirms in the signed-in browser (GET shows, POST changes); elsewhere it proves nothing', async () => {
    const { b, user } = await signedIn();
    const to = uniqueEmail('linked');
    await send(b, '/account/email', { action: 'request', new_email: to, current_password: user.password });
    const mail = await nextMailTo(to);
    const link = linkIn(mail);
    secrets.push(codeIn(mail), new URL(link).searchParams.get('token')!);

    // Another browser (a mail scanner, or someone else): nothing changes.
    const stranger = new Browser(t.app);
    const away = await stranger.get(relative(link));
    expect(away.statusCode).toBe(200);
    expect(away.body).toContain('sign in on this page with the account it is for');
    const other = await signedIn();
    const wrongAccount = await other.b.get(relative(link));
    expect(wrongAccount.body).toContain('This link is not for the account you are signed in with');

    const shown = await b.get(relative(link));
    expect(shown.statusCode).toBe(200);
    expect(shown.body).toContain(`Move your account to ${to}?`);
    expect(await emailOf(user.id)).toMatchObject({ email: user.email });
    const token = new URL(link).searchParams.get('token')!;
    const done = await b.post('/account/email/confirm', { csrf: csrfOf(shown.body), token });
    expect(done.statusCode).toBe(303);
    expect(await emailOf(user.id)).toEqual({ email: to, email_verified: 1 });
    const notice = await nextMailTo(user.email);
    expect(notice.subject).toBe('Your email address was changed');

    const event = await t.db.selectFrom('events').select(['data', 'app_id']).where('user_id', '=', user.id).where('type', '=', 'user.email_changed').executeTakeFirstOrThrow();
    expect(event.app_id).toBeNull();
    expect(JSON.parse(event.data)).toMatchObject({ old_email: user.email, new_email: to, method: 'link' });

    // Used up.
    const again = await b.post('/account/email/confirm', { csrf: csrfOf(shown.body), token });
    expect(again.statusCode).toBe(400);
  });

  it('a wrong current password is refused (403) next to its field; the same address is refused; nothing is mailed', async () => {
    const { b, user } = await signedIn();
    const wrong = await send(b, '/account/email', { action: 'request', new_email: uniqueEmail('no'), current_password: 'not it' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.body).toContain('The current password is incorrect.');
    const same = await send(b, '/account/email', { action: 'request', new_email: user.email, current_password: user.password });
    expect(same.statusCode).toBe(400);
    expect(same.body).toContain('This is already your email address.');
    const rows = await t.db.selectFrom('one_time_tokens').select(['id']).where('user_id', '=', user.id).where('kind', '=', 'email_change').execute();
    expect(rows).toHaveLength(0);
  });

  it('an account without a password needs a sign-in in the last 10 minutes (no password field)', async () => {
    const { b, user } = await signedIn();
    await t.db.updateTable('users').set({ password_hash: null }).where('id', '=', user.id).execute();
    const page = await b.get('/account');
    expect(page.body).not.toContain('name="current_password"');
    expect(page.body).toContain('signed in within the last 10 minutes');
    t.clock.advance(11 * 60);
    try {
      const stale = await send(b, '/account/email', { action: 'request', new_email: uniqueEmail('stale') });
      expect(stale.statusCode).toBe(403);
      expect(stale.body).toContain('Sign in again to change your email address.');
    } finally {
      t.clock.advance(-11 * 60);
    }
    const fresh = await send(b, '/account/email', { action: 'request', new_email: uniqueEmail('fresh') });
    expect(fresh.statusCode).toBe(303);
  });

  it('in Simplified Chinese', async () => {
    const { b } = await signedIn();
    const page = await b.get('/account?ui_locales=zh-CN');
    expect(page.body).toContain('邮箱地址');
    expect(page.body).toContain('更改邮箱地址');
    expect(page.body).not.toContain('email_change.');
  });
});
