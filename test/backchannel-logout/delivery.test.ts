import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { App } from '../../src/storage/repos/apps.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders, appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';
import { type LogoutClaims, type LogoutReceiver, type ReceivedLogout, startLogoutReceiver, validateLogoutTokenOf } from '../helpers/logout-tokens.js';
import { hashPassword } from '../../src/auth/passwords.js';

/**
 * OpenID Connect Back-Channel Logout 1.0 (docs/guides/back-channel-logout.md): a loopback receiver
 * validates every logout token as an RP must (§2.6, test/helpers/logout-tokens.ts: signature, `iss`,
 * `aud`, `iat`, `exp`, `typ`, `events`, `sub`/`sid`, no `nonce`), for each trigger; a receiver outage
 * is retried on the injected clock; an app without a URI, or one the user never signed in to, gets
 * nothing. Real database (SQLite, and PostgreSQL with TEST_DATABASE_URL), no mocks.
 */

let t: TestApp;
let receiver: LogoutReceiver;
let base: string;

beforeAll(async () => {
  receiver = await startLogoutReceiver();
  base = receiver.base;
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000' } });
});

afterAll(async () => {
  await t?.close();
  await receiver?.close();
});

const validateLogoutToken = (token: string, clientId: string): Promise<LogoutClaims> => validateLogoutTokenOf(t, token, clientId);

async function listeningApp(path: string, sessionRequired = false): Promise<App> {
  return makeApp(t.db, { backchannelLogout: { uri: `${base}${path}`, sessionRequired } });
}

async function signedIn(app: App, email = uniqueEmail('bcl')): Promise<{ user: UserRow; refresh: string; access: string; idToken: string }> {
  const user = await quickUser(t, { email, email_verified: 1 });
  await addMember(t, app, user);
  const tokens = await tokensFor(t, app, user);
  return { user, refresh: tokens.refresh_token, access: tokens.access_token, idToken: tokens.id_token! };
}

/**
 * Drains the outbox and returns what the receiver got at `path` since the call started; the background
 * deliverer may hold a due row's lease meanwhile, so it also waits for the rows it leased to settle.
 */
async function deliver(path: string): Promise<ReceivedLogout[]> {
  const before = receiver.received.length;
  await t.app.logoutDeliverer.drain();
  for (let i = 0; i < 100; i++) {
    const leased = await t.db.selectFrom('logout_deliveries').select('id').where('status', '=', 'pending').where('locked_until', '>', t.clock.now()).execute();
    if (leased.length === 0) break;
    await new Promise((r) => setTimeout(r, 50));
  }
  return receiver.received.slice(before).filter((r) => r.path === path);
}

describe('logout tokens on each trigger', () => {
  it('REST logout: a form-encoded logout_token, valid by §2.6, with the sid of the ID token', async () => {
    const client = await listeningApp('/rest-logout', true);
    const { user, refresh, idToken } = await signedIn(client);
    const sid = decodeJwt(idToken).sid;
    expect(typeof sid).toBe('string');
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/logout', payload: { refresh_token: refresh } })).statusCode).toBe(204);
    const got = await deliver('/rest-logout');
    expect(got).toHaveLength(1);
    expect(got[0]!.contentType).toBe('application/x-www-form-urlencoded');
    const claims = await validateLogoutToken(got[0]!.token, client.id);
    expect(claims).toMatchObject({ sub: user.id, sid, events: { 'http://schemas.openid.net/event/backchannel-logout': {} } });
    // Short-lived: signed at each attempt (docs/guides/back-channel-logout.md).
    expect(claims.exp - claims.iat).toBeLessThanOrEqual(300);
    const row = await t.db.selectFrom('logout_deliveries').select(['status', 'attempts']).where('id', '=', claims.jti!).executeTakeFirstOrThrow();
    expect(row).toEqual({ status: 'delivered', attempts: 1 });
  });

  it('session revocation over REST (DELETE /v1/auth/sessions/{id}) and block and disable each send one', async () => {
    const client = await listeningApp('/many');
    const a = await signedIn(client);
    const list = (await t.app.inject({ url: '/v1/auth/sessions', headers: bearer(a.access) })).json().sessions as Array<{ id: string; current: boolean }>;
    const other = await tokensFor(t, client, a.user);
    const otherEntry = (await t.app.inject({ url: '/v1/auth/sessions', headers: bearer(other.access_token) })).json().sessions.find((s: { current: boolean }) => s.current);
    expect(list.length).toBeGreaterThan(0);
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/auth/sessions/${otherEntry.id}`, headers: bearer(a.access) })).statusCode).toBe(204);
    const revoked = await deliver('/many');
    expect(revoked).toHaveLength(1);
    expect(await validateLogoutToken(revoked[0]!.token, client.id)).toMatchObject({ sub: a.user.id, sid: decodeJwt(other.id_token!).sid });

    // Block (per app, through the developer API).
    const b = await signedIn(client);
    const blocked = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${client.id}/users/${b.user.id}`, payload: { status: 'blocked' }, headers: bearer((await devKeyOf(client))) });
    expect(blocked.statusCode, blocked.body).toBe(200);
    const onBlock = await deliver('/many');
    expect(onBlock).toHaveLength(1);
    expect((await validateLogoutToken(onBlock[0]!.token, client.id)).sub).toBe(b.user.id);

    // Disable (the operator).
    const c = await signedIn(client);
    expect((await t.app.inject({ method: 'PATCH', url: `/v1/admin/users/${c.user.id}`, payload: { status: 'disabled' }, headers: adminHeaders })).statusCode).toBe(200);
    const onDisable = await deliver('/many');
    expect(onDisable).toHaveLength(1);
    expect((await validateLogoutToken(onDisable[0]!.token, client.id)).sub).toBe(c.user.id);
  });

  it('a password reset and an account deletion each send one', async () => {
    const client = await listeningApp('/account-changes');
    const password = 'an old passphrase for the reset 41';
    const passwordHash = await hashPassword(password);

    // Reset: the mailed token sets a new password, which ends every sign-in of the user.
    const r = await signedIn(client, uniqueEmail('bcl-reset'));
    await t.db.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', r.user.id).execute();
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email: r.user.email, client_id: client.id } })).statusCode).toBe(202);
    const mail = (await t.app.mailer.recent()).find((m) => m.to === r.user.email && m.kind === 'reset')!;
    const resetToken = /(?:reset_token|token)=(pr_[A-Za-z0-9_-]+)/.exec(mail.text)![1];
    const reset = await t.app.inject({ method: 'POST', url: '/v1/auth/password/reset', payload: { reset_token: resetToken, password: 'a brand new passphrase 42', client_id: client.id } });
    expect(reset.statusCode, reset.body).toBe(204);
    const onReset = await deliver('/account-changes');
    expect(onReset).toHaveLength(1);
    expect(await validateLogoutToken(onReset[0]!.token, client.id)).toMatchObject({ sub: r.user.id, sid: decodeJwt(r.idToken).sid });

    // Deletion: scheduling it ends the person's sign-ins at once.
    const d = await signedIn(client, uniqueEmail('bcl-delete'));
    await t.db.updateTable('users').set({ password_hash: passwordHash }).where('id', '=', d.user.id).execute();
    const deleted = await t.app.inject({ method: 'DELETE', url: '/v1/auth/account', payload: { password }, headers: bearer(d.access) });
    expect(deleted.statusCode, deleted.body).toBe(202);
    const onDelete = await deliver('/account-changes');
    expect(onDelete).toHaveLength(1);
    expect((await validateLogoutToken(onDelete[0]!.token, client.id)).sub).toBe(d.user.id);
  });

  it('an app without a URI gets nothing; an app the user never signed in to gets nothing', async () => {
    const silent = await makeApp(t.db);
    const listening = await listeningApp('/bystander');
    const { refresh } = await signedIn(silent);
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/logout', payload: { refresh_token: refresh, all: true } })).statusCode).toBe(204);
    expect(await deliver('/bystander')).toEqual([]);
    expect(await t.db.selectFrom('logout_deliveries').select('id').where('app_id', 'in', [silent.id, listening.id]).execute()).toEqual([]);
  });
});

describe('retries', () => {
  it('a receiver outage is retried with backoff on the injected clock, same jti, fresh token', async () => {
    const client = await listeningApp('/outage');
    const { refresh } = await signedIn(client);
    receiver.answer = 503;
    await t.app.inject({ method: 'POST', url: '/v1/auth/logout', payload: { refresh_token: refresh } });
    const first = await deliver('/outage');
    expect(first).toHaveLength(1);
    // Not due again before the backoff.
    expect(await deliver('/outage')).toEqual([]);
    const pending = await t.db.selectFrom('logout_deliveries').select(['status', 'attempts', 'last_status_code']).where('app_id', '=', client.id).executeTakeFirstOrThrow();
    expect(pending).toEqual({ status: 'pending', attempts: 1, last_status_code: 503 });
    receiver.answer = 204;
    t.clock.advance(10);
    const second = await deliver('/outage');
    expect(second).toHaveLength(1);
    const claims = await validateLogoutToken(second[0]!.token, client.id);
    expect(claims.jti).toBe(decodeJwt(first[0]!.token).jti);
    expect(await t.db.selectFrom('logout_deliveries').select(['status', 'attempts']).where('app_id', '=', client.id).executeTakeFirstOrThrow()).toEqual({ status: 'delivered', attempts: 2 });
    receiver.answer = 200;
  });
});

describe('registration', () => {
  it('the developer API sets and shows the URI; production refuses http and private addresses', async () => {
    const { apiKey: key } = await createDeveloperViaApi(t);
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', payload: { ...appBody(), backchannel_logout_uri: `${base}/dev`, backchannel_logout_session_required: true }, headers: bearer(key) });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ backchannel_logout_uri: `${base}/dev`, backchannel_logout_session_required: true });
    const strict = await buildTestApp({ env: { WEBHOOK_ALLOW_PRIVATE: '0' } });
    try {
      const dev = await createDeveloperViaApi(strict);
      for (const uri of ['http://rp.example/logout', 'https://127.0.0.1/logout', 'https://169.254.169.254/logout']) {
        const res = await strict.app.inject({ method: 'POST', url: '/v1/dev/apps', payload: { ...appBody(), backchannel_logout_uri: uri }, headers: bearer(dev.apiKey) });
        expect(res.statusCode, uri).toBe(400);
        expect(res.json()).toMatchObject({ code: 'invalid_request', details: [{ path: 'body.backchannel_logout_uri' }] });
      }
    } finally {
      await strict.close();
    }
  });

  it('discovery advertises back-channel logout with sessions', async () => {
    const doc = (await t.app.inject({ url: '/.well-known/openid-configuration' })).json();
    expect(doc).toMatchObject({ backchannel_logout_supported: true, backchannel_logout_session_supported: true });
  });
});

/** A developer key owning `client` (apps made by the factory belong to a fresh developer). */
const keys = new Map<string, string>();
async function devKeyOf(client: App): Promise<string> {
  if (!keys.has(client.id)) {
    const developer = await makeDeveloper(t.db);
    await t.db.updateTable('apps').set({ developer_id: developer.id }).where('id', '=', client.id).execute();
    keys.set(client.id, developer.apiKey);
  }
  return keys.get(client.id)!;
}
