import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeDeveloper, makeUser } from '../helpers/factories.js';
import { codeIn, linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';
import type { App } from '../../src/storage/repos/apps.js';
import { epochSeconds } from '../../src/shared/time.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { StatementRecorder } from '../helpers/statements.js';

let t: TestApp;
let smtp: TestSmtp;
let client: App;
const secrets: string[] = [];

const post = (url: string, payload: Record<string, unknown>, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'POST', url, payload, headers: { 'x-forwarded-for': '1.1.1.1', ...headers } });

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0' } });
  client = await makeApp(t.db, { redirectUris: ['https://app.example/cb', 'com.example.app:/auth'] });
});

afterAll(async () => {
  // docs/security/checklist.md#logging-and-errors: no password, token or code in any log line.
  expectNoSecretsInLogs(t.logs, secrets, 6);
  await t.close();
  await smtp.close();
});

describe('register and email verification', () => {
  it('registers (201 ok + tokens), mails a code, and the code verifies the email', async () => {
    const password = 'a perfectly fine passphrase';
    secrets.push(password);
    const res = await post('/v1/auth/register', { email: ' New.User@Example.com ', password, name: 'New User', client_id: client.id });
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body).toMatchObject({ status: 'ok', token_type: 'Bearer', user: { email: 'new.user@example.com', email_verified: false, name: 'New User' } });
    expect(body.access_token).toBeTruthy();
    expect(body.refresh_token).toMatch(/^rt_/);
    expect(res.headers['cache-control']).toBe('no-store');
    secrets.push(body.access_token, body.refresh_token);

    const mail = await smtp.waitFor((m) => mailTo(m) === 'new.user@example.com');
    const code = codeIn(mail);
    expect(code).toMatch(/^\d{6}$/);
    expect(mail.html).toContain(code);
    secrets.push(code);

    const wrong = code === '000000' ? '111111' : '000000';
    const bad = await post('/v1/email_verify/confirm', { code: wrong }, { authorization: `Bearer ${body.access_token}` });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_code', attempts_left: 4 });

    const ok = await post('/v1/email_verify/confirm', { code }, { authorization: `Bearer ${body.access_token}` });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toEqual({ email_verified: true });
    const again = await post('/v1/email_verify/confirm', { code }, { authorization: `Bearer ${body.access_token}` });
    expect(again.json().code).toBe('code_expired');

    const dup = await post('/v1/auth/register', { email: 'new.user@example.com', password, client_id: client.id });
    expect(dup.statusCode).toBe(409);
    expect(dup.json().code).toBe('email_taken');
  });

  it('refuses weak, common, email-equal passwords with weak_password, and huge ones before hashing', async () => {
    for (const password of ['short', 'password', '12345678', 'qwertyuiop', 'Password1']) {
      const res = await post('/v1/auth/register', { email: 'weak@example.com', password, client_id: client.id });
      expect(res.statusCode, password).toBe(400);
      expect(res.json().code, password).toBe('weak_password');
    }
    const same = await post('/v1/auth/register', { email: 'same.as.email@example.com', password: 'Same.As.Email@example.com', client_id: client.id });
    expect(same.json().code).toBe('weak_password');
    const tooLong = await post('/v1/auth/register', { email: 'long@example.com', password: 'x'.repeat(129), client_id: client.id });
    expect(tooLong.json().code).toBe('weak_password');

    const started = Date.now();
    const huge = await post('/v1/auth/login', { email: 'long@example.com', password: 'x'.repeat(60_000), client_id: client.id });
    expect(huge.statusCode).toBe(400);
    expect(huge.json().code).toBe('invalid_request');
    const megabyte = await post('/v1/auth/register', { email: 'long@example.com', password: 'x'.repeat(1024 * 1024), client_id: client.id });
    expect([400, 413]).toContain(megabyte.statusCode); // over the 64 KiB body limit: 413 before any parsing
    expect(Date.now() - started).toBeLessThan(1000);

    // 128 code points of emoji are fine (length counts code points, not UTF-16 units).
    const emoji = await post('/v1/auth/register', { email: 'emoji@example.com', password: '🔐'.repeat(128), client_id: client.id });
    expect(emoji.statusCode).toBe(201);
  });

  it('treats NFC and NFD spellings of a password as the same password', async () => {
    const nfc = 'caf\u00e9 au lait noir';
    const nfd = 'cafe\u0301 au lait noir';
    expect(nfc).not.toBe(nfd);
    const reg = await post('/v1/auth/register', { email: 'unicode@example.com', password: nfc, client_id: client.id });
    expect(reg.statusCode).toBe(201);
    const login = await post('/v1/auth/login', { email: 'unicode@example.com', password: nfd, client_id: client.id });
    expect(login.statusCode).toBe(200);
    expect(login.json().status).toBe('ok');
  });

  it('requires a known app with the Auth feature', async () => {
    const noClient = await post('/v1/auth/login', { email: 'a@example.com', password: 'whatever1' });
    expect(noClient.statusCode).toBe(400);
    expect(noClient.json().code).toBe('invalid_request');
    const unknown = await post('/v1/auth/login', { email: 'a@example.com', password: 'whatever1', client_id: 'app_nope' });
    expect(unknown.statusCode).toBe(401);
    expect(unknown.json().code).toBe('invalid_client');
    const noAuth = await makeApp(t.db, { features: { auth: false, profile: true } });
    const off = await post('/v1/auth/login', { email: 'a@example.com', password: 'whatever1' }, { 'x-client-id': noAuth.id });
    expect(off.statusCode).toBe(403);
    expect(off.json().code).toBe('feature_disabled');
  });
});

describe('login, enumeration and lockout', () => {
  it('answers unknown email and wrong password identically', async () => {
    await makeUser(t.app, { email: 'alice@example.com', password: 'alice secret passphrase' });
    const unknown = await post('/v1/auth/login', { email: 'carol@example.com', password: 'wrong password 1', client_id: client.id });
    const wrong = await post('/v1/auth/login', { email: 'alice@example.com', password: 'wrong password 1', client_id: client.id });
    expect(unknown.statusCode).toBe(401);
    expect(wrong.statusCode).toBe(401);
    expect(unknown.body).toBe(wrong.body);
    expect(wrong.json().code).toBe('invalid_credentials');
    expect(Object.keys(unknown.headers).sort()).toEqual(Object.keys(wrong.headers).sort());

    for (const path of ['/v1/auth/magic-link/request', '/v1/auth/password/forgot']) {
      const a = await post(path, { email: 'alice@example.com', client_id: client.id });
      const c = await post(path, { email: 'carol@example.com', client_id: client.id });
      expect(a.statusCode).toBe(202);
      expect(c.statusCode).toBe(202);
      expect(a.body).toBe(c.body);
      expect(a.json()).toEqual({ status: 'sent' });
    }
  });

  it('locks an account after 5 failures (6th → 429, right password refused) until LOGIN_LOCK_SECONDS pass', async () => {
    const user = await makeUser(t.app, { email: 'locked@example.com', password: 'the right password' });
    for (let i = 1; i <= 5; i++) {
      const res = await post('/v1/auth/login', { email: user.email, password: `wrong ${i} password`, client_id: client.id });
      expect(res.statusCode, `failure ${i}`).toBe(401);
    }
    const sixth = await post('/v1/auth/login', { email: user.email, password: 'wrong 6 password', client_id: client.id });
    expect(sixth.statusCode).toBe(429);
    expect(sixth.json().code).toBe('rate_limited');
    expect(Number(sixth.headers['retry-after'])).toBeGreaterThan(0);
    const right = await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id });
    expect(right.statusCode).toBe(429);

    // The same for an address without an account: no enumeration through the lock.
    for (let i = 1; i <= 5; i++) await post('/v1/auth/login', { email: 'ghost@example.com', password: `wrong ${i} password`, client_id: client.id });
    expect((await post('/v1/auth/login', { email: 'ghost@example.com', password: 'x wrong pass', client_id: client.id })).statusCode).toBe(429);

    t.clock.advance(t.config.throttle.loginLockSeconds + 1);
    const after = await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id });
    expect(after.statusCode).toBe(200);
    const events = await t.db.selectFrom('events').select(['type', 'data']).where('user_id', '=', user.id).execute();
    expect(events.map((e) => e.type)).toContain('user.locked');
    expect(events.map((e) => e.type)).toContain('user.login_succeeded');
    expect(JSON.stringify(events)).not.toContain(user.password);
  });

  it('disabled users get user_disabled only after a correct password; blocked users get user_blocked', async () => {
    const disabled = await makeUser(t.app, { email: 'disabled@example.com', password: 'disabled user pass', status: 'disabled' });
    expect((await post('/v1/auth/login', { email: disabled.email, password: 'not the password', client_id: client.id })).json().code).toBe('invalid_credentials');
    const res = await post('/v1/auth/login', { email: disabled.email, password: disabled.password, client_id: client.id });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('user_disabled');

    const blocked = await makeUser(t.app, { email: 'blocked@example.com', password: 'blocked user pass' });
    await t.db.insertInto('app_users').values({ app_id: client.id, user_id: blocked.id, status: 'blocked', created_at: 1, last_login_at: null }).execute();
    const b = await post('/v1/auth/login', { email: blocked.email, password: blocked.password, client_id: client.id });
    expect(b.statusCode).toBe(403);
    expect(b.json().code).toBe('user_blocked');
  });

  it('a first login makes the user a user of the app; a returning one stamps last_login_at on that one row', async () => {
    const developer = await makeDeveloper(t.db);
    const own = await makeApp(t.db, { developerId: developer.id });
    const user = await makeUser(t.app, { email: 'returning@example.com', password: 'a returning passphrase' });
    const listed = async () => {
      const res = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${own.id}/users`, headers: { authorization: `Bearer ${developer.apiKey}` } });
      expect(res.statusCode).toBe(200);
      return res.json() as { total: number; items: Array<{ id: string; created_at: string; last_login_at: string | null }> };
    };
    const seconds = (iso: string | null) => epochSeconds(Date.parse(iso ?? ''));
    // The file's clock follows the wall clock: each sign-in's time is bracketed, never guessed.
    const signIn = async () => {
      const from = t.clock.now();
      expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: own.id })).statusCode).toBe(200);
      return { from, to: t.clock.now() };
    };
    expect((await listed()).total).toBe(0);

    const first = await signIn();
    const once = await listed();
    expect(once).toMatchObject({ total: 1, items: [{ id: user.id }] });
    const joined = once.items[0]!.created_at;
    expect(seconds(joined)).toBeGreaterThanOrEqual(first.from);
    expect(seconds(joined)).toBeLessThanOrEqual(first.to);
    expect(once.items[0]!.last_login_at).toBe(joined);

    t.clock.advance(120);
    const second = await signIn();
    const twice = await listed();
    expect(twice).toMatchObject({ total: 1, items: [{ id: user.id, created_at: joined }] });
    expect(seconds(twice.items[0]!.last_login_at)).toBeGreaterThanOrEqual(second.from);
    expect(seconds(twice.items[0]!.last_login_at)).toBeLessThanOrEqual(second.to);
  });
});

describe('refresh and logout', () => {
  it('rotates refresh tokens, detects reuse, and logout revokes', async () => {
    const user = await makeUser(t.app, { email: 'refresher@example.com', password: 'refresher passphrase' });
    const login = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    const first = await post('/v1/auth/refresh', { refresh_token: login.refresh_token, client_id: client.id });
    expect(first.statusCode).toBe(200);
    expect(first.headers['cache-control']).toBe('no-store');
    const rotated = first.json();
    expect(rotated.refresh_token).not.toBe(login.refresh_token);
    secrets.push(login.refresh_token, rotated.refresh_token);
    // Inside the grace window: identical answer.
    const replay = await post('/v1/auth/refresh', { refresh_token: login.refresh_token, client_id: client.id });
    expect(replay.body).toBe(first.body);
    // After the window: reuse revokes the family.
    t.clock.advance(t.config.ttl.refreshReuseGrace + 1);
    const reuse = await post('/v1/auth/refresh', { refresh_token: login.refresh_token, client_id: client.id });
    expect(reuse.statusCode).toBe(400);
    expect(reuse.json().code).toBe('invalid_grant');
    expect((await post('/v1/auth/refresh', { refresh_token: rotated.refresh_token })).json().code).toBe('invalid_grant');

    const second = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    const third = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    expect((await post('/v1/auth/logout', {})).statusCode).toBe(400);
    expect((await post('/v1/auth/logout', { refresh_token: 'rt_unknown' })).statusCode).toBe(204);
    expect((await post('/v1/auth/logout', { refresh_token: second.refresh_token })).statusCode).toBe(204);
    expect((await post('/v1/auth/refresh', { refresh_token: second.refresh_token, client_id: client.id })).json().code).toBe('invalid_grant');
    // The other sign-in survives a plain logout, but not `all: true`.
    const fourth = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    expect((await post('/v1/auth/refresh', { refresh_token: third.refresh_token, client_id: client.id })).statusCode).toBe(200);
    expect((await post('/v1/auth/logout', { refresh_token: fourth.refresh_token, all: true })).statusCode).toBe(204);
    const after = await post('/v1/auth/refresh', { refresh_token: third.refresh_token, client_id: client.id });
    expect(after.json().code).toBe('invalid_grant');
  });
});

describe('magic links', () => {
  it('signs in by link token (single use) and by code; a newer link voids older ones', async () => {
    const user = await makeUser(t.app, { email: 'magic@example.com', password: 'magic user password' });
    // Only a user of the app gets a link to its redirect URI (docs/reference/rest-api.md#magic-links-and-reset-links): sign in to it once.
    expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).statusCode).toBe(200);
    await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id, redirect_uri: 'com.example.app:/auth' });
    const mail1 = await smtp.waitFor((m) => mailTo(m) === user.email && /sign-in link/i.test(m.subject ?? ''));
    const link1 = linkIn(mail1);
    expect(link1.startsWith('com.example.app:/auth?magic_token=ml_')).toBe(true);
    const token1 = new URL(link1).searchParams.get('magic_token')!;
    secrets.push(token1, codeIn(mail1));

    await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id });
    const mail2 = await smtp.waitFor((m) => mailTo(m) === user.email && m !== mail1 && /sign-in link/i.test(m.subject ?? ''));
    const link2 = linkIn(mail2);
    expect(link2.startsWith(`${t.config.authUrl}/magic-link?token=ml_`)).toBe(true);
    const token2 = new URL(link2).searchParams.get('token')!;
    const code2 = codeIn(mail2);
    secrets.push(token2, code2);

    const old = await post('/v1/auth/magic-link/verify', { token: token1, client_id: client.id });
    expect(old.statusCode).toBe(400);
    expect(old.json().code).toBe('invalid_token');

    const ok = await post('/v1/auth/magic-link/verify', { token: token2, client_id: client.id });
    expect(ok.statusCode).toBe(200);
    expect(ok.json()).toMatchObject({ status: 'ok', user: { email: user.email, email_verified: true } });
    expect((await post('/v1/auth/magic-link/verify', { token: token2, client_id: client.id })).json().code).toBe('invalid_token');
    // Using the link voided its code.
    expect((await post('/v1/auth/magic-link/verify', { email: user.email, code: code2, client_id: client.id })).json().code).toBe('code_expired');

    // By code, with wrong tries counted down and the grant voided at the 5th.
    await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id });
    const mail3 = await smtp.waitFor((m) => mailTo(m) === user.email && m !== mail1 && m !== mail2 && /sign-in link/i.test(m.subject ?? ''));
    const code3 = codeIn(mail3);
    secrets.push(code3, linkIn(mail3));
    const wrong = code3 === '123456' ? '654321' : '123456';
    const w1 = await post('/v1/auth/magic-link/verify', { email: user.email, code: wrong, client_id: client.id });
    expect(w1.json()).toMatchObject({ code: 'invalid_code', attempts_left: 4 });
    const good = await post('/v1/auth/magic-link/verify', { email: user.email, code: code3, client_id: client.id });
    expect(good.statusCode).toBe(200);
    expect((await post('/v1/auth/magic-link/verify', { token: new URL(linkIn(mail3)).searchParams.get('token'), client_id: client.id })).json().code).toBe('invalid_token');

    await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id });
    const mail4 = await smtp.waitFor((m) => mailTo(m) === user.email && ![mail1, mail2, mail3].includes(m) && /sign-in link/i.test(m.subject ?? ''));
    const code4 = codeIn(mail4);
    const wrong4 = code4 === '123456' ? '654321' : '123456';
    for (let left = 4; left >= 0; left--) {
      const r = await post('/v1/auth/magic-link/verify', { email: user.email, code: wrong4, client_id: client.id });
      expect(r.json()).toMatchObject({ code: 'invalid_code', attempts_left: left });
    }
    expect((await post('/v1/auth/magic-link/verify', { email: user.email, code: code4, client_id: client.id })).json().code).toBe('code_expired');
  });

  it('expires links after 15 minutes and refuses a redirect_uri that is not whitelisted', async () => {
    const user = await makeUser(t.app, { email: 'expiring@example.com', password: 'expiring passphrase' });
    await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id });
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    const token = new URL(linkIn(mail)).searchParams.get('token')!;
    secrets.push(token);
    t.clock.advance(15 * 60 + 1);
    expect((await post('/v1/auth/magic-link/verify', { token, client_id: client.id })).json().code).toBe('invalid_token');
    const evil = await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id, redirect_uri: 'https://evil.example/cb' });
    expect(evil.statusCode).toBe(400);
    expect(evil.json().code).toBe('invalid_redirect_uri');
  });

  it('builds links from AUTH_URL, never from the Host header', async () => {
    const user = await makeUser(t.app, { email: 'hosty@example.com', password: 'hosty passphrase' });
    await post('/v1/auth/magic-link/request', { email: user.email, client_id: client.id }, { host: 'evil.example', 'x-forwarded-host': 'evil.example' });
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    secrets.push(new URL(linkIn(mail)).searchParams.get('token')!);
    expect(linkIn(mail).startsWith(`${t.config.authUrl}/magic-link?token=`)).toBe(true);
    expect(mail.text).not.toContain('evil.example');
  });
});

describe('password reset', () => {
  it('forgot → reset: revokes every refresh token, never signs in, single use; old password refused', async () => {
    const user = await makeUser(t.app, { email: 'forgetful@example.com', password: 'old password here' });
    const session = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    secrets.push(session.refresh_token, session.access_token);
    const res = await post('/v1/auth/password/forgot', { email: user.email, client_id: client.id });
    expect(res.statusCode).toBe(202);
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email && /reset/i.test(m.subject ?? ''));
    const token = new URL(linkIn(mail)).searchParams.get('token')!;
    expect(token).toMatch(/^pr_/);
    secrets.push(token);

    const weak = await post('/v1/auth/password/reset', { reset_token: token, password: 'password' });
    expect(weak.json().code).toBe('weak_password');
    const newPassword = 'brand new passphrase';
    secrets.push(newPassword);
    const reset = await post('/v1/auth/password/reset', { reset_token: token, password: newPassword });
    expect(reset.statusCode).toBe(204);
    expect(reset.body).toBe('');
    expect((await post('/v1/auth/password/reset', { reset_token: token, password: 'another new passphrase' })).json().code).toBe('invalid_token');

    expect((await post('/v1/auth/refresh', { refresh_token: session.refresh_token, client_id: client.id })).json().code).toBe('invalid_grant');
    const verify = await post('/v1/email_verify/request', {}, { authorization: `Bearer ${session.access_token}` });
    expect(verify.statusCode).toBe(401);
    expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).statusCode).toBe(401);
    expect((await post('/v1/auth/login', { email: user.email, password: newPassword, client_id: client.id })).statusCode).toBe(200);
    await smtp.waitFor((m) => mailTo(m) === user.email && /changed/i.test(m.subject ?? ''));
    const types = (await t.db.selectFrom('events').select('type').where('user_id', '=', user.id).execute()).map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['password.reset_requested', 'password.reset']));
  });

  it('a successful login kills outstanding reset tokens', async () => {
    const user = await makeUser(t.app, { email: 'resetlogin@example.com', password: 'reset login pass' });
    await post('/v1/auth/password/forgot', { email: user.email, client_id: client.id });
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    const token = new URL(linkIn(mail)).searchParams.get('token')!;
    secrets.push(token);
    expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).statusCode).toBe(200);
    expect((await post('/v1/auth/password/reset', { reset_token: token, password: 'some new passphrase' })).json().code).toBe('invalid_token');
  });
});

describe('pending sign-in and profile completion', () => {
  it('pending(profile) → profile/complete → pending(verify_email) → confirm → ok with tokens', async () => {
    const strict = await makeApp(t.db, { requiredFields: ['name', 'phone_number', 'email_verified'] });
    const password = 'pending user passphrase';
    const reg = await post('/v1/auth/register', { email: 'pending@example.com', password, client_id: strict.id });
    expect(reg.statusCode).toBe(201);
    const pending = reg.json();
    expect(pending).toMatchObject({ status: 'pending', next_step: 'profile', required_fields: ['name', 'phone_number', 'email_verified'] });
    expect(pending.access_token).toBeUndefined();
    secrets.push(pending.session);

    const badPhone = await post('/v1/auth/profile/complete', { session: pending.session, data: { phone_number: '12345' } });
    expect(badPhone.statusCode).toBe(400);
    const extra = await post('/v1/auth/profile/complete', { session: pending.session, data: { admin: true } });
    expect(extra.statusCode).toBe(400);

    const step = await post('/v1/auth/profile/complete', { session: pending.session, data: { name: 'Pat', phone_number: '+14155550100' } });
    expect(step.statusCode).toBe(200);
    expect(step.json()).toMatchObject({ status: 'pending', next_step: 'verify_email', required_fields: ['email_verified'] });

    const mail = await smtp.waitFor((m) => mailTo(m) === 'pending@example.com');
    const code = codeIn(mail);
    secrets.push(code);
    const confirm = await post('/v1/email_verify/confirm', { code }, { authorization: `Bearer ${pending.session}` });
    expect(confirm.statusCode).toBe(200);

    const done = await post('/v1/auth/profile/complete', { session: pending.session, client_id: strict.id });
    expect(done.statusCode).toBe(200);
    expect(done.json()).toMatchObject({ status: 'ok', user: { name: 'Pat', phone_number: '+14155550100', email_verified: true } });
    expect(done.json().refresh_token).toMatch(/^rt_/);
    secrets.push(done.json().refresh_token);

    const wrongApp = await post('/v1/auth/profile/complete', { session: pending.session, client_id: client.id });
    expect(wrongApp.json().code).toBe('invalid_token');
    const garbage = await post('/v1/auth/profile/complete', { session: 'not-a-jwt' });
    expect(garbage.json().code).toBe('invalid_token');
  });
});

describe('email verification endpoint', () => {
  it('needs a bearer credential, mails a 10-minute code, counts wrong answers down to code_expired', async () => {
    expect((await post('/v1/email_verify/request', {})).statusCode).toBe(401);
    const user = await makeUser(t.app, { email: 'verifyme@example.com', password: 'verify me passphrase' });
    const login = (await post('/v1/auth/login', { email: user.email, password: user.password, client_id: client.id })).json();
    const auth = { authorization: `Bearer ${login.access_token}` };
    const res = await post('/v1/email_verify/request', {}, auth);
    expect(res.statusCode).toBe(202);
    expect(res.json()).toEqual({ status: 'sent', expires_in: 600 });
    const first = await smtp.waitFor((m) => mailTo(m) === user.email);
    // A new request voids the first code.
    await post('/v1/email_verify/request', {}, auth);
    const second = await smtp.waitFor((m) => mailTo(m) === user.email && m !== first);
    const code1 = codeIn(first);
    const code2 = codeIn(second);
    secrets.push(code1, code2);
    if (code1 !== code2) {
      const stale = await post('/v1/email_verify/confirm', { code: code1 }, auth);
      expect(stale.json().code).toBe('invalid_code');
    }
    const wrong = code2 === '999999' ? '888888' : '999999';
    let left = code1 !== code2 ? 3 : 4;
    for (; left >= 0; left--) expect((await post('/v1/email_verify/confirm', { code: wrong }, auth)).json()).toMatchObject({ code: 'invalid_code', attempts_left: left });
    expect((await post('/v1/email_verify/confirm', { code: code2 }, auth)).json().code).toBe('code_expired');

    await post('/v1/email_verify/request', {}, auth);
    const third = await smtp.waitFor((m) => mailTo(m) === user.email && m !== first && m !== second);
    secrets.push(codeIn(third));
    t.clock.advance(601);
    expect((await post('/v1/email_verify/confirm', { code: codeIn(third) }, auth)).json().code).toBe('code_expired');
  });
});

describe('statements per password login (round trips on PostgreSQL)', () => {
  const recorder = new StatementRecorder();
  let r: TestApp;
  beforeAll(async () => {
    r = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000' }, withDb: (db) => db.withPlugin(recorder) });
    await r.app.mailer.stop(); // no background delivery mixed into the recordings
  });
  afterAll(async () => r.close());

  it('reads the sign-in basis once and writes the sign-in in one transaction', async () => {
    const app = await makeApp(r.db, { redirectUris: ['https://app.example/cb'] });
    const user = await makeUser(r.app, { email: 'counted@example.com', password: 'a counted passphrase' });
    const login = () =>
      r.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: user.password, client_id: app.id }, headers: { 'x-forwarded-for': '1.1.1.2' } });
    expect((await login()).statusCode).toBe(200); // the first sign-in also records implied consent
    let res: Awaited<ReturnType<typeof login>> | undefined;
    const seen = await recorder.during(async () => {
      res = await login();
    });
    expect(res!.statusCode).toBe(200);
    expect(seen).toEqual([
      'select apps', // the client
      'insert throttle_counters', // the attempt, reserved before any hashing
      'select users',
      'delete throttle_counters', // a correct password: the failures are cleared and reset links void
      'update one_time_tokens',
      'select -', // membership, consent and second factors in one statement
      // the transaction: app sign-in, consent still in place, event, grant and refresh token
      'update app_users', // a returning user of the app: last_login_at stamped on its row
      'select consents',
      'insert events',
      'select webhook_endpoints', // the app's enabled webhook endpoints (none here): one indexed read (docs/webhooks.md)
      'insert grants',
      'insert refresh_tokens',
    ]);
  });
});
