import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { linkIn, mailTo, startSmtp, type TestSmtp } from '../helpers/smtp.js';
import type { App } from '../../src/storage/repos/apps.js';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { adminHeaders } from '../helpers/dev-api.js';
import { HASH_MAKERS } from '../import/hashes.js';

// docs/guides/password-policy.md: each door honours the policy of the app the person signs in to.
let t: TestApp;
let smtp: TestSmtp;
let strict: App;
let plain: App;

const post = (url: string, payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url, payload, headers: { 'x-forwarded-for': '1.1.1.2' } });

beforeAll(async () => {
  smtp = await startSmtp();
  t = await buildTestApp({ env: { SMTP_URL: smtp.url, IP_AUTH_PER_MINUTE: '1000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '100' } });
  strict = await makeApp(t.db, { passwordPolicy: { minLength: 14, characterClasses: 3, maxAgeDays: 30, historyCount: 3 } });
  plain = await makeApp(t.db);
});
afterAll(async () => {
  await t.close();
  await smtp.close();
});

describe('REST registration', () => {
  it('applies the app minimum and character classes; another app keeps the default', async () => {
    const short = await post('/v1/auth/register', { email: 'p1@example.com', password: 'violin harb', client_id: strict.id });
    expect(short.statusCode).toBe(400);
    expect(short.json()).toMatchObject({ code: 'weak_password', reason: 'too_short' });
    const classes = await post('/v1/auth/register', { email: 'p1@example.com', password: 'violin harbour tabby', client_id: strict.id });
    expect(classes.json()).toMatchObject({ code: 'weak_password', reason: 'character_classes' });
    expect((await post('/v1/auth/register', { email: 'p1@example.com', password: 'Violin harbour 42', client_id: strict.id })).statusCode).toBe(201);
    expect((await post('/v1/auth/register', { email: 'p2@example.com', password: 'violin harbour', client_id: plain.id })).statusCode).toBe(201);
  });

  it('refuses a breached password with reason common, nothing created', async () => {
    const res = await post('/v1/auth/register', { email: 'p3@example.com', password: 'Qwertyuiop123', client_id: plain.id });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'weak_password', reason: 'common' });
    expect(res.json().message).toMatch(/common or breached/);
    expect((await post('/v1/auth/login', { email: 'p3@example.com', password: 'Qwertyuiop123', client_id: plain.id })).json().code).toBe('invalid_credentials');
  });
});

describe('reset', () => {
  it('refuses a breached password and one of the last N, under the policy of the app named', async () => {
    const user = await makeUser(t.app, { email: 'p4@example.com', password: 'Original pass 111!' });
    await post('/v1/auth/password/forgot', { email: user.email, client_id: strict.id });
    const mail = await smtp.waitFor((m) => mailTo(m) === user.email);
    const token = new URL(linkIn(mail)).searchParams.get('token')!;
    const breached = await post('/v1/auth/password/reset', { reset_token: token, password: 'wile8&micrometer', client_id: strict.id });
    expect(breached.json()).toMatchObject({ code: 'weak_password', reason: 'common' });
    const reused = await post('/v1/auth/password/reset', { reset_token: token, password: user.password, client_id: strict.id });
    expect(reused.json()).toMatchObject({ code: 'weak_password', reason: 'reused' });
    expect((await post('/v1/auth/password/reset', { reset_token: token, password: 'Second pass 2222!', client_id: strict.id })).statusCode).toBe(204);

    // The replaced password is in the history now: a later change back to it is refused too.
    await post('/v1/auth/password/forgot', { email: user.email, client_id: strict.id });
    const mail2 = await smtp.waitFor((m) => mailTo(m) === user.email && m.subject === 'Reset your password' && m !== mail);
    const token2 = new URL(linkIn(mail2)).searchParams.get('token')!;
    expect((await post('/v1/auth/password/reset', { reset_token: token2, password: user.password, client_id: strict.id })).json().reason).toBe('reused');
    // Without an app the platform default applies (no reuse rule).
    expect((await post('/v1/auth/password/reset', { reset_token: token2, password: user.password })).statusCode).toBe(204);
  });
});

describe('maximum age', () => {
  it('answers the right but expired password with password_expired, then signs in with a new one', async () => {
    const user = await makeUser(t.app, { email: 'p5@example.com', password: 'Aged password 111!' });
    const before = await post('/v1/auth/login', { email: user.email, password: user.password, client_id: strict.id });
    expect(before.statusCode).toBe(200);
    t.clock.advance(31 * 86400);
    try {
      // Another app without a maximum age still signs in.
      expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: plain.id })).statusCode).toBe(200);
      const expired = await post('/v1/auth/login', { email: user.email, password: user.password, client_id: strict.id });
      expect(expired.statusCode, expired.body).toBe(403);
      expect(expired.json()).toMatchObject({ code: 'password_expired', max_age_days: 30 });
      expect(expired.json().access_token).toBeUndefined();
      // A wrong current password gets nothing, whatever the new one.
      expect((await post('/v1/auth/login', { email: user.email, password: 'wrong password!', new_password: 'Fresh pass 33333!', client_id: strict.id })).json().code).toBe('invalid_credentials');
      // The same password again is not a new one.
      const same = await post('/v1/auth/login', { email: user.email, password: user.password, new_password: user.password, client_id: strict.id });
      expect(same.json()).toMatchObject({ code: 'weak_password', reason: 'reused' });
      const renewed = await post('/v1/auth/login', { email: user.email, password: user.password, new_password: 'Fresh pass 33333!', client_id: strict.id });
      expect(renewed.statusCode).toBe(200);
      expect(renewed.json().access_token).toBeTruthy();
      expect((await post('/v1/auth/login', { email: user.email, password: 'Fresh pass 33333!', client_id: strict.id })).statusCode).toBe(200);
      expect((await post('/v1/auth/login', { email: user.email, password: user.password, client_id: strict.id })).json().code).toBe('invalid_credentials');
    } finally {
      t.clock.advance(-31 * 86400);
    }
  });
});

describe('import', () => {
  // An import carries hashes, which no policy can check for length or breaches: an app with a maximum
  // age asks for a new password, checked under its policy, at the first sign-in to it
  // (docs/guides/password-policy.md#imported-passwords).
  const importRows = (rows: unknown[], query = '') => t.app.inject({ method: 'POST', url: `/v1/admin/users/import${query}`, headers: adminHeaders, payload: rows as never });

  it('the dry run says which imported passwords an app will renew, and writes nothing', async () => {
    const hash = (await HASH_MAKERS['bcrypt $2b$']!('password')).password_hash;
    const rows = [
      { email: 'imp-dry1@example.com', password_hash: hash, apps: [{ client_id: strict.id }, { client_id: plain.id }] },
      { email: 'imp-dry2@example.com', password_hash: hash, apps: [{ client_id: plain.id }] },
      { email: 'imp-dry3@example.com', apps: [{ client_id: strict.id }] },
    ];
    const dry = await importRows(rows, '?dry_run=true');
    expect(dry.statusCode, dry.body).toBe(200);
    expect(dry.json().results).toEqual([
      { line: 1, status: 'created', email: 'imp-dry1@example.com', details: [{ path: 'password_hash', message: `the password policy of app ${strict.id} asks for a new password at the first sign-in to it` }] },
      { line: 2, status: 'created', email: 'imp-dry2@example.com' },
      { line: 3, status: 'created', email: 'imp-dry3@example.com' },
    ]);
    expect(await findUserByEmail(t.db, 'imp-dry1@example.com')).toBeUndefined();
    // The real import reports the same.
    const real = await importRows(rows);
    expect(real.json().results[0].details).toEqual(dry.json().results[0].details);
  });

  it('attack: a breached password carried in by an import cannot sign in to an app with a maximum age until replaced under its policy', async () => {
    const hash = (await HASH_MAKERS['bcrypt $2b$']!('password')).password_hash;
    const res = await importRows([{ email: 'imp-weak@example.com', password_hash: hash, apps: [{ client_id: strict.id }] }]);
    expect(res.json().summary.created).toBe(1);
    const login = (payload: Record<string, unknown>) => post('/v1/auth/login', { email: 'imp-weak@example.com', ...payload });
    // An app without a maximum age: the imported password signs in (its policy applies at the next change) and is rehashed.
    expect((await login({ password: 'password', client_id: plain.id })).statusCode).toBe(200);
    // The strict app: nothing but password_expired, even after the rehash, however recent the import.
    const expired = await login({ password: 'password', client_id: strict.id });
    expect(expired.statusCode).toBe(403);
    expect(expired.json()).toMatchObject({ code: 'password_expired', max_age_days: 30 });
    expect(expired.json().access_token).toBeUndefined();
    // The new one is checked under the strict policy: length, classes, the breach list.
    expect((await login({ password: 'password', new_password: 'short Pass 1', client_id: strict.id })).json()).toMatchObject({ code: 'weak_password', reason: 'too_short' });
    expect((await login({ password: 'password', new_password: 'wile8&micrometer', client_id: strict.id })).json()).toMatchObject({ code: 'weak_password', reason: 'common' });
    const renewed = await login({ password: 'password', new_password: 'Harbour lantern 2031!', client_id: strict.id });
    expect(renewed.statusCode, renewed.body).toBe(200);
    expect(renewed.json().access_token).toBeTruthy();
    expect((await login({ password: 'Harbour lantern 2031!', client_id: strict.id })).statusCode).toBe(200);
    expect((await login({ password: 'password', client_id: plain.id })).json().code).toBe('invalid_credentials');
  });
});
