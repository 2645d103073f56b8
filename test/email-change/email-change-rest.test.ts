import type { ParsedMail } from 'mailparser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../src/auth/passwords.js';
import type { App } from '../../src/storage/repos/apps.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { insertTestUser, makeApp } from '../helpers/factories.js';
import { StatementRecorder } from '../helpers/statements.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';
import { codeIn, linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';

/**
 * Email change over REST (docs/account/email-change.md): `POST /v1/auth/email/change` mails a code and
 * a link to the new address; `/confirm` with the code moves the account, verified, tells the old
 * address, records `user.email_changed`, and keeps the app_users copy in step. A taken address answers
 * exactly as a free one. Real SMTP (test/helpers/smtp.ts), real database (SQLite, and PostgreSQL with
 * TEST_DATABASE_URL).
 */

const PASSWORD = 'a perfectly fine passphrase 7';
let t: TestApp;
let smtp: TestSmtp;
let client: App;
let passwordHash: string;
const secrets: string[] = [PASSWORD];

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '5', CODE_MAX_ATTEMPTS: '5' } });
  client = await makeApp(t.db, { redirectUris: ['https://app.example/cb'] });
  passwordHash = await hashPassword(PASSWORD);
});

afterAll(async () => {
  // No password, token or code in any log line.
  expectNoSecretsInLogs(t?.logs ?? [], secrets, 6);
  await t?.close();
  await smtp?.close();
});

async function person(overrides: Partial<UserRow> = {}): Promise<{ user: UserRow; token: string }> {
  const user = await quickUser(t, { email: uniqueEmail('old'), email_verified: 1, password_hash: passwordHash, ...overrides });
  await addMember(t, client, user);
  const tokens = await tokensFor(t, client, user);
  secrets.push(tokens.access_token, tokens.refresh_token);
  return { user, token: tokens.access_token };
}

const post = (url: string, token: string, payload: Record<string, unknown>) =>
  t.app.inject({ method: 'POST', url, payload, headers: { authorization: `Bearer ${token}`, 'x-forwarded-for': '1.1.1.1' } });
const change = (token: string, payload: Record<string, unknown>) => post('/v1/auth/email/change', token, payload);
const confirm = (token: string, code: string) => post('/v1/auth/email/change/confirm', token, { code });

const seen = new Set<ParsedMail>();
/** The next mail to `to` not seen before. */
async function nextMailTo(to: string): Promise<ParsedMail> {
  const mail = await smtp.waitFor((m) => mailTo(m) === to && !seen.has(m));
  seen.add(mail);
  return mail;
}
async function codeMailTo(to: string): Promise<{ code: string; link: string }> {
  const mail = await nextMailTo(to);
  expect(mail.subject).toBe('Confirm your new email address');
  const code = codeIn(mail);
  const link = linkIn(mail);
  expect(code).toMatch(/^\d{6}$/);
  expect(link).toMatch(/\/account\/email\/confirm\?token=ec_/);
  secrets.push(code, new URL(link).searchParams.get('token')!);
  return { code, link };
}

const userRow = (id: string) => t.db.selectFrom('users').select(['id', 'email', 'email_verified', 'updated_at']).where('id', '=', id).executeTakeFirstOrThrow();

describe('POST /v1/auth/email/change and /confirm', () => {
  it('moves the account to the new address with the mailed code: verified, app_users copy, event, notice to the old address', async () => {
    const { user, token } = await person({ email_verified: 0 });
    const to = uniqueEmail('new');
    const res = await change(token, { email: `  ${to.toUpperCase()} `, password: PASSWORD });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ status: 'pending', expires_in: 1200 });
    expect(res.headers['cache-control']).toBe('no-store');
    const { code } = await codeMailTo(to);

    const done = await confirm(token, code);
    expect(done.statusCode).toBe(200);
    expect(done.json().user).toMatchObject({ id: user.id, email: to, email_verified: true });
    expect(await userRow(user.id)).toMatchObject({ email: to, email_verified: 1 });
    const copy = await t.db.selectFrom('app_users').select(['email']).where('user_id', '=', user.id).where('app_id', '=', client.id).executeTakeFirstOrThrow();
    expect(copy.email).toBe(to);

    const events = await t.db.selectFrom('events').select(['type', 'app_id', 'data']).where('user_id', '=', user.id).where('type', '=', 'user.email_changed').execute();
    expect(events).toHaveLength(1);
    expect(events[0]!.app_id).toBe(client.id);
    expect(JSON.parse(events[0]!.data)).toEqual({ old_email: user.email, new_email: to, was_verified: false, method: 'code' });
    expect(events[0]!.data).not.toContain(code);

    const notice = await nextMailTo(user.email);
    expect(notice.subject).toBe('Your email address was changed');
    expect(notice.text).toContain('/account');
    expect(notice.text).toMatch(/If this was not you/);
    expect(codeIn(notice)).toBe('');

    // The code is used up; the user's userinfo now says the new address.
    expect((await confirm(token, code)).json().code).toBe('code_expired');
  });

  it('answers a taken address exactly as a free one, moves nothing, and mails the owner no code', async () => {
    const owner = await quickUser(t, { email: uniqueEmail('owner'), email_verified: 1 });
    const a = await person();
    const b = await person();
    const free = uniqueEmail('free');
    const taken = await change(a.token, { email: owner.email, password: PASSWORD });
    const untaken = await change(b.token, { email: free, password: PASSWORD });
    expect(taken.statusCode).toBe(untaken.statusCode);
    expect(taken.body).toBe(untaken.body);
    const strip = (h: Record<string, unknown>) => Object.keys(h).filter((k) => !['x-request-id', 'date', 'content-length'].includes(k)).sort().map((k) => `${k}: ${String(h[k])}`);
    expect(strip(taken.headers)).toEqual(strip(untaken.headers));
    await codeMailTo(free);

    const notice = await nextMailTo(owner.email);
    expect(notice.subject).toBe('Someone tried to use this email address');
    expect(codeIn(notice)).toBe('');
    expect(notice.text).not.toContain('/account/email/confirm');
    expect(notice.text).not.toContain(a.user.email);

    // Guessing gets the same answers as for a free address; the owner's account is untouched.
    const guess = await confirm(a.token, '123456');
    expect(guess.statusCode).toBe(400);
    expect(guess.json()).toMatchObject({ code: 'invalid_code', attempts_left: 4 });
    expect(await userRow(owner.id)).toMatchObject({ email: owner.email, email_verified: 1 });
    expect(await userRow(a.user.id)).toMatchObject({ email: a.user.email });
  });

  it('refuses the same address, a non-address, and a missing or wrong current password (403, nothing mailed)', async () => {
    const { user, token } = await person();
    expect((await change(token, { email: user.email.toUpperCase(), password: PASSWORD })).json()).toMatchObject({ code: 'invalid_request', message: 'This is already your email address.' });
    expect((await change(token, { email: 'not-an-address', password: PASSWORD })).json().code).toBe('invalid_request');
    const missing = await change(token, { email: uniqueEmail('x') });
    expect(missing.statusCode).toBe(403);
    const wrong = await change(token, { email: uniqueEmail('x'), password: 'not the password' });
    expect(wrong.statusCode).toBe(403);
    expect(wrong.json()).toMatchObject({ code: 'forbidden', message: 'The current password is incorrect.' });
    const pending = await t.db.selectFrom('one_time_tokens').select(['id']).where('user_id', '=', user.id).where('kind', '=', 'email_change').execute();
    expect(pending).toHaveLength(0);
  });

  it('an account without a password cannot change its address over REST (an app token alone never moves it)', async () => {
    const { user, token } = await person({ password_hash: null });
    const res = await change(token, { email: uniqueEmail('np') });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'forbidden', details: [{ path: 'reauth', message: 'use_account_page' }] });
    const pending = await t.db.selectFrom('one_time_tokens').select(['id']).where('user_id', '=', user.id).where('kind', '=', 'email_change').execute();
    expect(pending).toHaveLength(0);
  });

  it('an account with a second factor needs a sign-in that proved it recently', async () => {
    const { user } = await person();
    await t.db.insertInto('totp_factors').values({ user_id: user.id, secret_sealed: 'sealed', confirmed_at: t.clock.now(), last_step: null, created_at: t.clock.now() }).execute();
    const single = await tokensFor(t, client, user);
    secrets.push(single.access_token, single.refresh_token);
    const res = await change(single.access_token, { email: uniqueEmail('mfa'), password: PASSWORD });
    expect(res.statusCode).toBe(403);
    expect(res.json().details).toEqual([{ path: 'reauth', message: 'needs_second_factor' }]);
  });

  it('limits wrong codes (CODE_MAX_ATTEMPTS) and refuses an expired code', async () => {
    const a = await person();
    const to = uniqueEmail('limit');
    await change(a.token, { email: to, password: PASSWORD });
    const { code } = await codeMailTo(to);
    const wrong = code === '000000' ? '111111' : '000000';
    for (let left = 4; left >= 0; left--) {
      const res = await confirm(a.token, wrong);
      expect(res.json()).toMatchObject({ code: 'invalid_code', attempts_left: left });
    }
    expect((await confirm(a.token, code)).json().code).toBe('code_expired');
    expect(await userRow(a.user.id)).toMatchObject({ email: a.user.email });

    const b = await person();
    const later = uniqueEmail('expire');
    await change(b.token, { email: later, password: PASSWORD });
    const mailed = await codeMailTo(later);
    t.clock.advance(21 * 60);
    try {
      // A token of a new sign-in (the first one expired with the code).
      const again = await tokensFor(t, client, b.user);
      secrets.push(again.access_token, again.refresh_token);
      const res = await confirm(again.access_token, mailed.code);
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('code_expired');
    } finally {
      t.clock.advance(-21 * 60);
    }
    expect(await userRow(b.user.id)).toMatchObject({ email: b.user.email });
  });

  it('a newer request replaces the pending one', async () => {
    const { user, token } = await person();
    const first = uniqueEmail('first');
    const second = uniqueEmail('second');
    await change(token, { email: first, password: PASSWORD });
    const one = await codeMailTo(first);
    await change(token, { email: second, password: PASSWORD });
    const two = await codeMailTo(second);
    if (one.code !== two.code) expect((await confirm(token, one.code)).json().code).toBe('invalid_code');
    const done = await confirm(token, two.code);
    expect(done.statusCode).toBe(200);
    expect(await userRow(user.id)).toMatchObject({ email: second });
  });

  it('refuses with 409 email_taken when the address was taken before the confirmation; nothing moves', async () => {
    const { user, token } = await person();
    const to = uniqueEmail('race');
    await change(token, { email: to, password: PASSWORD });
    const { code } = await codeMailTo(to);
    const other = await quickUser(t, { email: to });
    const res = await confirm(token, code);
    expect(res.statusCode).toBe(409);
    expect(res.json().code).toBe('email_taken');
    expect(await userRow(user.id)).toMatchObject({ email: user.email });
    expect(await userRow(other.id)).toMatchObject({ email: to });
  });

  it('limits requests per account (MAIL_PER_HOUR)', async () => {
    const { token } = await person();
    for (let i = 0; i < 5; i++) expect((await change(token, { email: uniqueEmail('many'), password: PASSWORD })).statusCode).toBe(202);
    const over = await change(token, { email: uniqueEmail('many'), password: PASSWORD });
    expect(over.statusCode).toBe(429);
    expect(over.json().code).toBe('rate_limited');
  });

  it('needs an access token', async () => {
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/email/change', payload: { email: 'a@b.example' } })).statusCode).toBe(401);
  });
});

describe('a taken address costs the same work as a free one', () => {
  const recorder = new StatementRecorder();
  let r: TestApp;
  let app: App;
  beforeAll(async () => {
    r = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0' }, withDb: (db) => db.withPlugin(recorder) });
    await r.app.mailer.stop(); // no background delivery mixed into the recordings
    app = await makeApp(r.db, { redirectUris: ['https://app.example/cb'] });
  });
  afterAll(async () => r?.close());

  it('sends the same statements in the same order', async () => {
    const owner = await insertTestUser(r.db, { email: uniqueEmail('owner') }, r.clock.now());
    const asking = async (to: string) => {
      const user = await insertTestUser(r.db, { email: uniqueEmail('asker'), password_hash: passwordHash }, r.clock.now());
      const { response } = await r.app.tokens.issueTokens(r.db, { app, user, scope: 'openid email', authTime: r.clock.now(), amr: ['pwd'] });
      let status = 0;
      const seen = await recorder.during(async () => {
        const res = await r.app.inject({ method: 'POST', url: '/v1/auth/email/change', payload: { email: to, password: PASSWORD }, headers: { authorization: `Bearer ${response.access_token}` } });
        status = res.statusCode;
      });
      expect(status).toBe(202);
      return seen;
    };
    const free = await asking(uniqueEmail('free'));
    const taken = await asking(owner.email);
    expect(taken).toEqual(free);
    expect(free).toContain('insert outbox');
  });
});

describe('the daily budget of wrong codes', () => {
  let r: TestApp;
  beforeAll(async () => {
    r = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0', CODE_MAX_FAILURES_PER_DAY: '2' } });
  });
  afterAll(async () => r?.close());

  it('counts email change codes with the account’s other codes (CODE_MAX_FAILURES_PER_DAY): over it, 429', async () => {
    const app = await makeApp(r.db, { redirectUris: ['https://app.example/cb'] });
    const user = await insertTestUser(r.db, { email: uniqueEmail('budget'), password_hash: passwordHash }, r.clock.now());
    const { response } = await r.app.tokens.issueTokens(r.db, { app, user, scope: 'openid email', authTime: r.clock.now(), amr: ['pwd'] });
    const headers = { authorization: `Bearer ${response.access_token}` };
    expect((await r.app.inject({ method: 'POST', url: '/v1/auth/email/change', payload: { email: uniqueEmail('to'), password: PASSWORD }, headers })).statusCode).toBe(202);
    const guess = () => r.app.inject({ method: 'POST', url: '/v1/auth/email/change/confirm', payload: { code: '000000' }, headers });
    const answers = [];
    for (let i = 0; i < 3; i++) answers.push((await guess()).json().code);
    // '000000' could be the code itself (one in a million): then the first answer moves the account.
    if (answers[0] !== undefined) expect(answers).toEqual(['invalid_code', 'invalid_code', 'rate_limited']);
  });
});
