import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newRecoveryCodes, recoveryCodeHash } from '../../src/mfa/codes.js';
import { newId } from '../../src/shared/ids.js';
import type { App } from '../../src/storage/repos/apps.js';
import { grantConsent } from '../../src/storage/repos/consents.js';
import { replaceRecoveryCodes } from '../../src/storage/repos/factors.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { insertPasskey } from '../../src/storage/repos/passkeys.js';
import { upsertProfile } from '../../src/storage/repos/profiles.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';
import { type LogoutReceiver, startLogoutReceiver, validateLogoutTokenOf } from '../helpers/logout-tokens.js';
import { Browser, PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * The purge of a deleted account, verified in the database (issue 58: "no personal field of a deleted
 * user remains in any table"). A person is given data in every place the app keeps any — registration,
 * REST and hosted sign-ins, a failed sign-in, a magic link, a profile document per app, consent, a
 * provider binding, factors, a passkey, a legal acceptance, an app with back-channel logout — from a
 * recognisable IP address and user agent; then they delete the account, the grace passes on the
 * injected clock and the maintenance loop's own background pass (PURGE_INTERVAL_SECONDS, not a direct
 * call) purges. Then EVERY column of EVERY table (listed from the database itself, so a table added later is
 * swept too) is scanned for the person's email, name, phone, birthdate, IP, user agent and id: the only
 * place allowed to hold anything is `events.user_id`. Another person's data stays untouched.
 */

const DAY = 86400;
const [RECOVERY, OTHER_RECOVERY] = newRecoveryCodes(2) as [string, string];
const IP = '203.0.113.77';
const UA = 'SweepAgent/9.9 (deletion test)';
const NAME = 'Zebulon Sweepstake';
const PHONE = '+14155550199';
const BIRTHDATE = '1979-03-17';
let t: TestApp;
let client: App;
let second: App;
let logouts: LogoutReceiver;

beforeAll(async () => {
  logouts = await startLogoutReceiver();
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0', MAIL_PER_HOUR: '50', PURGE_INTERVAL_SECONDS: '1', OUTBOX_RETENTION_DAYS: '30' } });
  client = await makeApp(t.db, { redirectUris: ['https://app.example/cb'] });
  second = await makeApp(t.db, { redirectUris: ['https://second.example/cb'], backchannelLogout: { uri: `${logouts.base}/second`, sessionRequired: false } });
});

afterAll(async () => {
  await t?.close();
  await logouts?.close();
});

type Origin = { ip: string; ua: string; phone: string; birthdate: string };
const ORIGIN: Origin = { ip: IP, ua: UA, phone: PHONE, birthdate: BIRTHDATE };
const OTHER: Origin = { ip: '198.51.100.9', ua: 'OtherAgent/1.0', phone: '+14155550100', birthdate: '1990-11-02' };
const post = (url: string, payload: Record<string, unknown>, origin: Origin = ORIGIN) =>
  t.app.inject({ method: 'POST', url, payload, remoteAddress: origin.ip, headers: { 'user-agent': origin.ua } });

/** Everything one person leaves behind, through the real doors where there is one. */
async function livedIn(email: string, name: string, recovery: string, origin: Origin): Promise<{ id: string; access: string }> {
  const registered = await post('/v1/auth/register', { email, password: PASSWORD, name, client_id: client.id, accept_terms: true }, origin);
  expect(registered.statusCode).toBe(201);
  const id: string = registered.json().user.id;
  const now = t.clock.now();
  await t.db.updateTable('users').set({ phone_number: origin.phone, birthdate: origin.birthdate, email_verified: 1 }).where('id', '=', id).execute();
  // A second app, a failed and a good sign-in, a magic link (a single-use row and a mail to the address).
  expect((await post('/v1/auth/login', { email, password: 'not the password', client_id: client.id }, origin)).statusCode).toBe(401);
  const login = await post('/v1/auth/login', { email, password: PASSWORD, client_id: second.id }, origin);
  expect(login.statusCode).toBe(200);
  expect((await post('/v1/auth/magic-link/request', { email, client_id: client.id }, origin)).statusCode).toBe(202);
  // A hosted-page session.
  const browser = new Browser(t.app);
  expect((await browser.login(email)).statusCode).toBe(303);
  // Per-app data: profile documents that mention the person, consent, a provider binding, factors, a passkey, a legal acceptance.
  await upsertProfile(t.db, { appId: client.id, userId: id, data: JSON.stringify({ nickname: name, contact: email, phone: origin.phone }), at: now });
  await upsertProfile(t.db, { appId: second.id, userId: id, data: JSON.stringify({ born: origin.birthdate }), at: now });
  await grantConsent(t.db, client.id, id, 'openid email profile', now);
  await insertIdentity(t.db, { id: newId('idn'), userId: id, issuer: 'https://idp.example', subject: `sub-${id}`, email, createdAt: now } as never);
  await t.db.insertInto('totp_factors').values({ user_id: id, secret_sealed: 'sealed-secret', confirmed_at: now, last_step: null, created_at: now }).execute();
  await replaceRecoveryCodes(t.db, id, [recoveryCodeHash(recovery)!], now);
  await insertPasskey(t.db, {
    id: newId('pk'), credentialId: `cred-${id}`, userId: id, publicKey: 'cHVibGljLWtleQ', counter: 0, transports: ['internal'],
    deviceType: 'multiDevice', backedUp: true, name: `${name}'s phone`, appId: null, createdAt: now,
  });
  await t.db.insertInto('legal_acceptances').values({ id: newId('acc'), user_id: id, owner: 'platform', doc_type: 'terms', lang: 'en', version: 1, accepted_at: now }).execute();
  return { id, access: login.json().access_token };
}

type Hit = { table: string; column: string; value: string };

/** Every column of every table, scanned for any of `needles`. */
async function sweep(needles: string[]): Promise<Hit[]> {
  const tables = await t.db.introspection.getTables();
  expect(tables.length).toBeGreaterThan(20);
  const hits: Hit[] = [];
  for (const table of tables) {
    const columns = table.columns.map((c) => c.name);
    const rows = (await (t.db as never as import('kysely').Kysely<any>).selectFrom(table.name).select(columns).execute()) as Array<Record<string, unknown>>;
    for (const row of rows) {
      for (const column of columns) {
        const value = row[column];
        if (value === null || value === undefined) continue;
        const text = typeof value === 'string' ? value : Buffer.isBuffer(value) ? value.toString('utf8') : String(value);
        if (needles.some((needle) => text.includes(needle))) hits.push({ table: table.name, column, value: text.slice(0, 200) });
      }
    }
  }
  return hits;
}

describe('the purge of a deleted account, swept table by table', () => {
  it('leaves nothing of the person anywhere but events.user_id; another person is untouched; the address registers again', async () => {
    const email = uniqueEmail('sweep');
    const person = await livedIn(email, NAME, RECOVERY, ORIGIN);
    const otherEmail = uniqueEmail('stays');
    const other = await livedIn(otherEmail, 'Olive Other', OTHER_RECOVERY, OTHER);

    // Before: the needles are found in many places (the sweep does see them).
    const before = await sweep([email, NAME, PHONE, IP, UA]);
    const tablesBefore = new Set(before.map((h) => h.table));
    for (const table of ['users', 'app_users', 'events', 'outbox', 'one_time_tokens', 'profiles', 'provider_identities', 'passkeys', 'throttle_counters']) {
      expect(tablesBefore, table).toContain(table);
    }

    const res = await t.app.inject({ method: 'DELETE', url: '/v1/auth/account', payload: { password: PASSWORD, code: RECOVERY }, headers: { authorization: `Bearer ${person.access}`, 'user-agent': UA }, remoteAddress: IP });
    expect(res.statusCode).toBe(202);
    // Scheduling signed the person out of the second app at once (back-channel logout, validated as an RP would).
    await expect.poll(() => logouts.received.length, { timeout: 10_000 }).toBeGreaterThan(0);
    expect(await validateLogoutTokenOf(t, logouts.received[0]!.token, second.id)).toMatchObject({ sub: person.id });
    await expect.poll(async () => (await t.db.selectFrom('logout_deliveries').select('status').where('user_id', '=', person.id).execute()).map((r) => r.status)).toEqual(['delivered']);
    expect(await t.db.selectFrom('users').select('id').where('id', '=', person.id).execute()).toHaveLength(1);

    // The grace passes on the injected clock; the background pass (every second here) purges on its own.
    t.clock.advance(7 * DAY + 1);
    await expect.poll(async () => (await t.db.selectFrom('users').select('id').where('id', '=', person.id).execute()).length, { timeout: 10_000 }).toBe(0);
    await expect.poll(() => t.logs.some((line) => line.includes('"accounts_deleted":1'))).toBe(true);

    // The other person has their own address, name, phone, IP and user agent: nothing is excused but events.user_id.
    const hits = await sweep([email, NAME, PHONE, BIRTHDATE, IP, UA, person.id]);
    const allowed = (h: Hit) => h.table === 'events' && h.column === 'user_id' && h.value === person.id;
    expect(hits.filter((h) => !allowed(h))).toEqual([]);
    expect(hits.some((h) => h.table === 'events' && h.column === 'user_id')).toBe(true);

    // The events of the deleted person keep the record with nothing but the id.
    const events = await t.db.selectFrom('events').select(['type', 'app_id', 'ip', 'user_agent', 'data']).where('user_id', '=', person.id).execute();
    expect(events.length).toBeGreaterThan(5);
    for (const e of events) expect(e).toMatchObject({ ip: null, user_agent: null, data: '{}' });
    expect(events.filter((e) => e.type === 'user.deleted').map((e) => e.app_id).sort()).toEqual([client.id, second.id, null].sort());

    // The other person still has everything.
    const stays = await t.db.selectFrom('users').select(['email', 'name', 'phone_number']).where('id', '=', other.id).executeTakeFirstOrThrow();
    expect(stays).toEqual({ email: otherEmail, name: 'Olive Other', phone_number: OTHER.phone });
    const otherEvents = await t.db.selectFrom('events').select(['ip', 'user_agent']).where('user_id', '=', other.id).where('ip', 'is not', null).execute();
    expect(otherEvents.length).toBeGreaterThan(0);
    expect(await t.db.selectFrom('profiles').select('app_id').where('user_id', '=', other.id).execute()).toHaveLength(2);

    // The address is free again.
    const again = await post('/v1/auth/register', { email, password: PASSWORD, client_id: client.id });
    expect(again.statusCode).toBe(201);
    expect(again.json().user.id).not.toBe(person.id);
  });
});
