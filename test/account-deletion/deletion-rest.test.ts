import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../src/auth/passwords.js';
import { recoveryCodeHash } from '../../src/mfa/codes.js';
import type { App } from '../../src/storage/repos/apps.js';
import { replaceRecoveryCodes } from '../../src/storage/repos/factors.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';
import { adminHeaders, appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * Account deletion over REST (docs/account/deletion.md): `DELETE /v1/auth/account` needs the person's
 * access token AND the current password (and a second-factor code when one is enrolled); scheduling
 * signs the person out everywhere and mails the date; signing in during the grace answers
 * `account_deletion_scheduled` unless the body asks to cancel; the purge runs from the maintenance loop
 * on the injected clock; a grace of 0 deletes at once. Real database (SQLite, and PostgreSQL with
 * TEST_DATABASE_URL), no mocks.
 */

const PASSWORD = 'a perfectly fine passphrase 7';
const DAY = 86400;
let t: TestApp;
let client: App;
let passwordHash: string;
const secrets: string[] = [PASSWORD];

beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '5' } });
  client = await makeApp(t.db, { redirectUris: ['https://app.example/cb'] });
  passwordHash = await hashPassword(PASSWORD);
});

afterAll(async () => {
  expectNoSecretsInLogs(t?.logs ?? [], secrets, 6);
  await t?.close();
});

async function person(overrides: Partial<UserRow> = {}, amr: string[] = ['pwd']): Promise<{ user: UserRow; token: string; refresh: string }> {
  const user = await quickUser(t, { email: uniqueEmail('del'), email_verified: 1, password_hash: passwordHash, ...overrides });
  await addMember(t, client, user);
  const { response } = await t.app.tokens.issueTokens(t.db, { app: client, user, scope: 'openid profile email', authTime: t.clock.now(), amr: amr as never });
  secrets.push(response.access_token, response.refresh_token);
  return { user, token: response.access_token, refresh: response.refresh_token };
}

const del = (token: string, payload?: Record<string, unknown>) =>
  t.app.inject({ method: 'DELETE', url: '/v1/auth/account', ...(payload ? { payload } : {}), headers: { authorization: `Bearer ${token}` } });
const userRow = (id: string) => t.db.selectFrom('users').select(['id', 'email', 'deletion_scheduled_at']).where('id', '=', id).executeTakeFirst();
const eventsOf = (userId: string, type: string) => t.db.selectFrom('events').select(['type', 'app_id', 'data', 'ip']).where('user_id', '=', userId).where('type', '=', type).execute();
const login = (email: string, extra: Record<string, unknown> = {}) =>
  t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password: PASSWORD, client_id: client.id, ...extra } });

describe('DELETE /v1/auth/account: who may ask', () => {
  it('refuses an app token alone (no password in the body): nothing changes', async () => {
    // The attack: an app (or whoever stole one of its tokens) tries to delete the person's account.
    const { user, token } = await person();
    const res = await del(token);
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'forbidden', details: [{ path: 'password' }] });
    const empty = await del(token, {});
    expect(empty.statusCode).toBe(403);
    expect(await userRow(user.id)).toMatchObject({ deletion_scheduled_at: null });
    expect(await eventsOf(user.id, 'user.deletion_scheduled')).toEqual([]);
    // The token still works: a refused attempt signs nobody out.
    expect((await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(200);
  });

  it('refuses a wrong password with 403 and changes nothing', async () => {
    const { user, token } = await person();
    const res = await del(token, { password: 'not the password at all' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'forbidden', message: 'The current password is incorrect.', details: [{ path: 'password' }] });
    expect(await userRow(user.id)).toMatchObject({ deletion_scheduled_at: null });
    expect((await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${token}` } })).statusCode).toBe(200);
  });

  it('refuses an account without a password over REST (the account page is its door)', async () => {
    const { user, token } = await person({ password_hash: null });
    const res = await del(token, { password: 'anything' });
    expect(res.statusCode).toBe(403);
    expect(res.json()).toMatchObject({ code: 'forbidden', details: [{ path: 'reauth', message: 'use_account_page' }] });
    expect(await userRow(user.id)).toMatchObject({ deletion_scheduled_at: null });
  });

  it('with a second factor: the password alone is not enough, even on a token whose sign-in was multi-factor; a wrong code is refused; a recovery code works', async () => {
    const { user, token } = await person({}, ['pwd', 'otp', 'mfa']);
    // A factor (recovery codes count beside a real one: the authenticator row is enough for that).
    await t.db.insertInto('totp_factors').values({ user_id: user.id, secret_sealed: 'not-openable', confirmed_at: t.clock.now(), last_step: null, created_at: t.clock.now() }).execute();
    const code = 'ABCDE-FGHJK';
    await replaceRecoveryCodes(t.db, user.id, [recoveryCodeHash(code)!], t.clock.now());
    secrets.push(code);

    const noCode = await del(token, { password: PASSWORD });
    expect(noCode.statusCode).toBe(403);
    expect(noCode.json()).toMatchObject({ code: 'forbidden', details: [{ path: 'reauth', message: 'needs_second_factor' }] });
    const wrong = await del(token, { password: PASSWORD, code: '123456' });
    expect(wrong.statusCode).toBe(400);
    expect(wrong.json()).toMatchObject({ code: 'invalid_code' });
    expect(await userRow(user.id)).toMatchObject({ deletion_scheduled_at: null });

    const ok = await del(token, { password: PASSWORD, code });
    expect(ok.statusCode).toBe(202);
    expect((await userRow(user.id))!.deletion_scheduled_at).not.toBeNull();
  });
});

describe('DELETE /v1/auth/account: the grace period', () => {
  it('schedules the deletion, signs out everywhere, mails the date, records the event', async () => {
    const { user, token, refresh } = await person();
    const other = await tokensFor(t, client, user);
    secrets.push(other.access_token, other.refresh_token);
    const before = t.clock.now();
    const res = await del(token, { password: PASSWORD });
    expect(res.statusCode).toBe(202);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body.status).toBe('scheduled');
    const due = Date.parse(body.deletion_scheduled_at) / 1000;
    expect(due).toBeGreaterThanOrEqual(before + 7 * DAY);
    expect(due).toBeLessThanOrEqual(t.clock.now() + 7 * DAY);
    expect((await userRow(user.id))!.deletion_scheduled_at).toBe(due);

    // Signed out everywhere: every access token and refresh token of every grant is dead.
    for (const access of [token, other.access_token]) {
      expect((await t.app.inject({ method: 'GET', url: '/oauth/userinfo', headers: { authorization: `Bearer ${access}` } })).statusCode).toBe(401);
    }
    for (const rt of [refresh, other.refresh_token]) {
      const r = await t.app.inject({ method: 'POST', url: '/v1/auth/refresh', payload: { refresh_token: rt, client_id: client.id } });
      expect(r.statusCode).toBe(400);
    }
    const grants = await t.db.selectFrom('grants').select(['revoked_at', 'revoked_reason']).where('user_id', '=', user.id).execute();
    expect(grants.length).toBe(2);
    for (const g of grants) expect(g).toMatchObject({ revoked_reason: 'account_deletion' });

    const [event] = await eventsOf(user.id, 'user.deletion_scheduled');
    expect(event).toMatchObject({ app_id: client.id });
    expect(JSON.parse(event!.data)).toEqual({ scheduled_at: body.deletion_scheduled_at.replace(/\.\d+Z$/, '.000Z'), grace_days: 7, via: 'api' });
    const mail = (await t.app.mailer.recent()).find((m) => m.to === user.email && m.subject === 'Your account will be deleted');
    expect(mail).toBeDefined();
    expect(mail!.text).toContain('http://localhost:3000/account');
    expect(mail!.text).toContain('Keep my account');

    // A second request cannot come: its token is gone.
    expect((await del(token, { password: PASSWORD })).statusCode).toBe(401);
  });

  it('sign-in during the grace answers account_deletion_scheduled (with the date) and signs nobody in; cancel_deletion keeps the account', async () => {
    const { user, token } = await person();
    const scheduled = await del(token, { password: PASSWORD });
    const at = scheduled.json().deletion_scheduled_at;

    const refused = await login(user.email);
    expect(refused.statusCode).toBe(403);
    expect(refused.json()).toMatchObject({ code: 'account_deletion_scheduled', deletion_scheduled_at: at });
    expect(await t.db.selectFrom('grants').select('id').where('user_id', '=', user.id).where('revoked_at', 'is', null).execute()).toEqual([]);
    // A wrong password learns nothing about the schedule.
    const wrong = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: 'wrong password here', client_id: client.id } });
    expect(wrong.json().code).toBe('invalid_credentials');

    const kept = await login(user.email, { cancel_deletion: true });
    expect(kept.statusCode).toBe(200);
    expect(kept.json()).toMatchObject({ status: 'ok', user: { id: user.id } });
    secrets.push(kept.json().access_token, kept.json().refresh_token);
    expect(await userRow(user.id)).toMatchObject({ deletion_scheduled_at: null });
    const [cancelled] = await eventsOf(user.id, 'user.deletion_cancelled');
    expect(JSON.parse(cancelled!.data)).toEqual({ via: 'sign_in' });
    // Kept: the purge after the grace leaves the account alone.
    t.clock.advance(8 * DAY);
    await t.app.purge.runOnce();
    expect(await userRow(user.id)).toMatchObject({ id: user.id });
  });

  it('with a second factor, the password alone cannot keep the account over REST: cancel_deletion is refused (the hosted pages ask the factor first)', async () => {
    const { user, token } = await person();
    await t.db.insertInto('totp_factors').values({ user_id: user.id, secret_sealed: 'not-openable', confirmed_at: t.clock.now(), last_step: null, created_at: t.clock.now() }).execute();
    const recovery = 'KLMNP-QRSTV';
    await replaceRecoveryCodes(t.db, user.id, [recoveryCodeHash(recovery)!], t.clock.now());
    secrets.push(recovery);
    expect((await del(token, { password: PASSWORD, code: recovery })).statusCode).toBe(202);

    const attempt = await login(user.email, { cancel_deletion: true });
    expect(attempt.statusCode).toBe(403);
    expect(attempt.json()).toMatchObject({ code: 'forbidden', details: [{ path: 'reauth', message: 'use_account_page' }] });
    expect((await userRow(user.id))!.deletion_scheduled_at).not.toBeNull();
    expect(await eventsOf(user.id, 'user.deletion_cancelled')).toEqual([]);
  });

  it('other sign-in doors refuse during the grace (REST magic link): account_deletion_scheduled, nothing cancelled', async () => {
    const { user, token } = await person();
    expect((await del(token, { password: PASSWORD })).statusCode).toBe(202);
    const due = (await userRow(user.id))!.deletion_scheduled_at;
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/magic-link/request', payload: { email: user.email, client_id: client.id } })).statusCode).toBe(202);
    let magic: string | undefined;
    for (let i = 0; i < 100 && !magic; i++) {
      magic = (await t.app.mailer.recent()).map((m) => /token=(ml_[A-Za-z0-9_-]+)/.exec(m.to === user.email ? m.text : '')?.[1]).find(Boolean);
      if (!magic) await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(magic).toBeDefined();
    secrets.push(magic!);
    const res = await t.app.inject({ method: 'POST', url: '/v1/auth/magic-link/verify', payload: { token: magic, client_id: client.id } });
    expect(res.statusCode).toBe(403);
    expect(res.json().code).toBe('account_deletion_scheduled');
    expect((await userRow(user.id))!.deletion_scheduled_at).toBe(due);
  });

  it('the purge after the grace (maintenance loop, injected clock) deletes the account and records user.deleted per app; the address registers again', async () => {
    const { user, token } = await person({ name: 'Dora Deleted' });
    const second = await makeApp(t.db, { redirectUris: ['https://second.example/cb'] });
    await addMember(t, second, user);
    expect((await del(token, { password: PASSWORD })).statusCode).toBe(202);

    // Within the grace nothing is purged.
    t.clock.advance(7 * DAY - 60);
    await t.app.purge.runOnce();
    expect(await userRow(user.id)).toBeDefined();

    t.clock.advance(120);
    await t.app.purge.runOnce();
    expect(await userRow(user.id)).toBeUndefined();
    const deleted = await eventsOf(user.id, 'user.deleted');
    expect(deleted.map((e) => e.app_id).sort((a, b) => String(a).localeCompare(String(b)))).toEqual([client.id, second.id, null].sort((a, b) => String(a).localeCompare(String(b))));
    // Idempotent: another run records nothing more.
    await t.app.purge.runOnce();
    expect(await eventsOf(user.id, 'user.deleted')).toHaveLength(3);

    const again = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email: user.email, password: PASSWORD, client_id: client.id } });
    expect(again.statusCode).toBe(201);
    expect(again.json().user.id).not.toBe(user.id);
    secrets.push(again.json().access_token, again.json().refresh_token);
  });
});

describe('ACCOUNT_DELETION_GRACE_DAYS=0', () => {
  it('deletes at once: the answer says deleted, the row is gone, no mail waits for the address', async () => {
    const now0 = await buildTestApp({ env: { ACCOUNT_DELETION_GRACE_DAYS: '0', IP_AUTH_PER_MINUTE: '100000' } });
    try {
      const app0 = await makeApp(now0.db, { redirectUris: ['https://app.example/cb'] });
      const user = await quickUser(now0, { email: uniqueEmail('now'), email_verified: 1, password_hash: passwordHash });
      await addMember(now0, app0, user);
      const tokens = await tokensFor(now0, app0, user);
      secrets.push(tokens.access_token, tokens.refresh_token);
      const res = await now0.app.inject({ method: 'DELETE', url: '/v1/auth/account', payload: { password: PASSWORD }, headers: { authorization: `Bearer ${tokens.access_token}` } });
      expect(res.statusCode).toBe(202);
      expect(res.json().status).toBe('deleted');
      expect(await now0.db.selectFrom('users').select('id').where('id', '=', user.id).executeTakeFirst()).toBeUndefined();
      expect(await now0.db.selectFrom('outbox').select('id').where('to_address', '=', user.email).execute()).toEqual([]);
      const types = (await now0.db.selectFrom('events').select(['type', 'app_id']).where('user_id', '=', user.id).execute()).map((e) => e.type);
      expect(types).toContain('user.deletion_scheduled');
      expect(types.filter((x) => x === 'user.deleted')).toHaveLength(2);
    } finally {
      await now0.close();
    }
  });
});

describe('the admin and developer APIs see a scheduled deletion; only the admin cancels it', () => {
  it('shows deletion_scheduled_at to both, and the admin keeps the account', async () => {
    const dev = await createDeveloperViaApi(t);
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(dev.apiKey), payload: appBody() });
    expect(created.statusCode).toBe(201);
    const devApp = (await t.db.selectFrom('apps').select('id').where('id', '=', created.json().id).executeTakeFirstOrThrow()).id;
    const { user, token } = await person();
    await t.db.insertInto('app_users').values({ app_id: devApp, user_id: user.id, status: 'active', created_at: t.clock.now(), last_login_at: t.clock.now() }).execute();
    const at = (await del(token, { password: PASSWORD })).json().deletion_scheduled_at;

    const listed = await t.app.inject({ method: 'GET', url: `/v1/admin/users?q=${encodeURIComponent(user.email)}`, headers: adminHeaders });
    expect(listed.json().items).toEqual([expect.objectContaining({ id: user.id, deletion_scheduled_at: at })]);
    const seen = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${devApp}/users`, headers: bearer(dev.apiKey) });
    expect(seen.statusCode).toBe(200);
    expect(seen.json().items).toEqual([expect.objectContaining({ id: user.id, deletion_scheduled_at: at })]);
    // The developer API has no way to cancel a person's own request.
    const devCancel = await t.app.inject({ method: 'DELETE', url: `/v1/dev/apps/${devApp}/users/${user.id}/deletion`, headers: bearer(dev.apiKey) });
    expect(devCancel.statusCode).toBe(404);
    const devAsAdmin = await t.app.inject({ method: 'DELETE', url: `/v1/admin/users/${user.id}/deletion`, headers: bearer(dev.apiKey) });
    expect(devAsAdmin.statusCode).toBe(401);
    expect((await userRow(user.id))!.deletion_scheduled_at).not.toBeNull();

    const cancelled = await t.app.inject({ method: 'DELETE', url: `/v1/admin/users/${user.id}/deletion`, headers: adminHeaders });
    expect(cancelled.statusCode).toBe(200);
    expect(cancelled.json()).toMatchObject({ id: user.id, deletion_scheduled_at: null });
    const [event] = await eventsOf(user.id, 'user.deletion_cancelled');
    expect(JSON.parse(event!.data)).toEqual({ via: 'admin' });
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/admin/users/${user.id}/deletion`, headers: adminHeaders })).statusCode).toBe(404);
    // The person signs in again as usual.
    expect((await login(user.email)).statusCode).toBe(200);
  });
});
