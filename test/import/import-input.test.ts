import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/shared/crypto.js';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { insertWebhookEndpoint } from '../../src/storage/repos/webhooks.js';
import { buildTestApp, TEST_SECRET_KEY, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { adminHeaders, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeClient, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';
import { FIREBASE_VECTOR, HASH_MAKERS } from './hashes.js';

// docs/guides/migrating-users.md: every bad input is a clear per-row or request error, and nothing is half-written.
describe('user import: rows, conflicts and bad input', () => {
  let t: TestApp;
  let client: TestClient;
  let bcryptHash: string;
  beforeAll(async () => {
    t = await buildTestApp();
    client = await makeClient(t);
    bcryptHash = (await HASH_MAKERS['bcrypt $2b$']!('imported pass 1')).password_hash;
  });
  afterAll(async () => t.close());

  const post = (payload: unknown, options: { query?: string; contentType?: string; headers?: Record<string, string> } = {}) =>
    t.app.inject({
      method: 'POST',
      url: `/v1/admin/users/import${options.query ?? ''}`,
      headers: { ...(options.headers ?? adminHeaders), ...(options.contentType ? { 'content-type': options.contentType } : {}) },
      payload: payload as string,
    });
  const users = () => countAll(t.db, 'users');

  it('is for the admin only: no token, a wrong one, or a developer API key → 401 and nothing written', async () => {
    const before = await users();
    const { apiKey } = await createDeveloperViaApi(t);
    for (const headers of [{}, bearer('not-the-admin-token-0123456789abcdef'), bearer(apiKey)]) {
      const res = await post([{ email: uniqueEmail('intruder'), password_hash: bcryptHash }], { headers });
      expect(res.statusCode).toBe(401);
    }
    expect(await users()).toBe(before);
  });

  it('NDJSON with a truncated line: that line is reported invalid by its number, the others are imported', async () => {
    const [a, b, c] = [uniqueEmail('nd'), uniqueEmail('nd'), uniqueEmail('nd')];
    const body = [JSON.stringify({ email: a, password_hash: bcryptHash }), '', `{"email": "${b}", "password_ha`, JSON.stringify({ email: c })].join('\n');
    const res = await post(body, { contentType: 'application/x-ndjson' });
    expect(res.statusCode, res.body).toBe(200);
    const result = res.json();
    expect(result.summary).toEqual({ created: 2, unchanged: 0, conflict: 0, invalid: 1 });
    expect(result.results.map((r: { line: number; status: string }) => [r.line, r.status])).toEqual([[1, 'created'], [3, 'invalid'], [4, 'created']]);
    expect(result.results[1].reason).toBe('invalid_json');
    expect(await findUserByEmail(t.db, b)).toBeUndefined();
  });

  it('an unknown hash format, or one out of bounds, is that row’s error; the user is not created', async () => {
    const rows = [
      { email: uniqueEmail('md5'), password_hash: '5f4dcc3b5aa765d61d8327deb882cf99' },
      { email: uniqueEmail('sha1'), password_hash: '{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=' },
      { email: uniqueEmail('bcrypt31'), password_hash: bcryptHash.replace(/^\$2b\$04\$/, '$2b$31$') },
      { email: uniqueEmail('pbkdf2huge'), password_hash: '$pbkdf2-sha256$i=900000000$c2FsdA$aGFzaGhhc2hoYXNoaGFzaGhhc2g' },
    ];
    const result = (await post(rows)).json();
    expect(result.summary.invalid).toBe(4);
    for (const [i, r] of result.results.entries()) {
      expect(r).toMatchObject({ line: i + 1, status: 'invalid', reason: 'unknown_hash_format', details: [{ path: 'password_hash' }] });
      expect(await findUserByEmail(t.db, rows[i]!.email)).toBeUndefined();
    }
    // The reason never repeats the hash.
    expect(JSON.stringify(result)).not.toContain('5f4dcc3b');
  });

  it('invalid fields are checked by the registration rules and reported by path', async () => {
    const rows = [
      { email: 'not-an-email', password_hash: bcryptHash },
      { email: uniqueEmail('phone'), phone_number: '12345' },
      { email: uniqueEmail('birth'), birthdate: '2999-01-01' },
      { email: uniqueEmail('name'), name: 'a\u0000b' },
      { email: uniqueEmail('extra'), favourite_colour: 'blue' },
      { email: uniqueEmail('ok'), phone_number: '+49 151 234-5678', birthdate: '1990-02-03', name: ' Ada ' },
    ];
    const result = (await post(rows)).json();
    expect(result.results.map((r: { status: string }) => r.status)).toEqual(['invalid', 'invalid', 'invalid', 'invalid', 'invalid', 'created']);
    expect(result.results[0].details[0].path).toBe('email');
    expect(result.results[1].details[0].path).toBe('phone_number');
    expect(result.results[2].details[0].path).toBe('birthdate');
    expect(result.results[3].details[0].path).toBe('name');
    const ok = (await findUserByEmail(t.db, rows[5]!.email))!;
    expect([ok.phone_number, ok.birthdate, ok.name]).toEqual(['+491512345678', '1990-02-03', 'Ada']);
  });

  it('a 50 MB body → 413 payload_too_large, nothing written', async () => {
    const before = await users();
    const row = JSON.stringify({ email: 'big@example.com', password_hash: bcryptHash, name: 'x'.repeat(90) });
    const body = `${row}\n`.repeat(Math.ceil((50 * 1024 * 1024) / (row.length + 1)));
    const res = await post(body, { contentType: 'application/x-ndjson' });
    expect(res.statusCode).toBe(413);
    expect(res.json().code).toBe('payload_too_large');
    expect(await users()).toBe(before);
  });

  it('over 10,000 users in one request → 400 invalid_request, nothing written', async () => {
    const before = await users();
    const rows = Array.from({ length: 10_001 }, (_, i) => ({ email: `many${i}@example.com` }));
    const res = await post(rows);
    expect(res.statusCode).toBe(400);
    expect(res.json().code).toBe('invalid_request');
    const ndjson = rows.map((r) => JSON.stringify(r)).join('\n');
    expect((await post(ndjson, { contentType: 'application/x-ndjson' })).json().code).toBe('invalid_request');
    expect(await users()).toBe(before);
  });

  it('duplicate emails (any case) or external ids in one file: the first is imported, the rest reported', async () => {
    const email = uniqueEmail('dup');
    const result = (await post([
      { email, external_id: 'd-1', password_hash: bcryptHash },
      { email: email.toUpperCase(), external_id: 'd-2' },
      { email: uniqueEmail('dup2'), external_id: 'd-1' },
    ])).json();
    expect(result.results.map((r: { status: string; reason?: string }) => [r.status, r.reason])).toEqual([['created', undefined], ['invalid', 'duplicate_email'], ['invalid', 'duplicate_external_id']]);
    expect(result.results[1].details[0].message).toContain('line 1');
  });

  it('an existing account is a conflict and keeps its credentials; importing the same file again changes nothing', async () => {
    const email = uniqueEmail('existing');
    const reg = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password: 'registered pass 1', client_id: client.app.id } });
    expect(reg.statusCode, reg.body).toBeLessThan(300);
    const stored = (await findUserByEmail(t.db, email))!;
    const result = (await post([{ email, password_hash: bcryptHash, name: 'Takeover' }])).json();
    expect(result.results[0]).toMatchObject({ status: 'conflict', reason: 'email_taken', user_id: stored.id });
    const after = (await findUserByEmail(t.db, email))!;
    expect(after).toEqual(stored);
    expect((await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password: 'imported pass 1', client_id: client.app.id } })).statusCode).toBe(401);

    const file = [
      { email: uniqueEmail('again'), external_id: 'again-1', name: 'Ada', password_hash: bcryptHash, email_verified: true },
      { email: uniqueEmail('again'), external_id: 'again-2' },
    ];
    expect((await post(file)).json().summary).toMatchObject({ created: 2 });
    const events = await countAll(t.db, 'events');
    const again = (await post(file)).json();
    expect(again.summary).toEqual({ created: 0, unchanged: 2, conflict: 0, invalid: 0 });
    expect(await countAll(t.db, 'events')).toBe(events);

    // The same email with other data, or the same external id with another email: reported, never merged.
    const changed = (await post([{ ...file[0], name: 'Someone else' }, { email: uniqueEmail('moved'), external_id: 'again-2' }])).json();
    expect(changed.results[0]).toMatchObject({ status: 'conflict', reason: 'differs', details: [{ path: 'name' }] });
    expect(changed.results[1]).toMatchObject({ status: 'conflict', reason: 'external_id_taken' });
    expect((await findUserByEmail(t.db, file[0]!.email))!.name).toBe('Ada');
  });

  it('dry_run reports what would happen and writes nothing', async () => {
    const before = [await users(), await countAll(t.db, 'events')];
    const result = (await post([{ email: uniqueEmail('dry'), password_hash: bcryptHash }, { email: 'bad' }], { query: '?dry_run=true' })).json();
    expect(result).toMatchObject({ dry_run: true, summary: { created: 1, invalid: 1 } });
    expect(result.results[0].user_id).toBeUndefined();
    expect([await users(), await countAll(t.db, 'events')]).toEqual(before);
  });

  it('Firebase: a malformed project key is a request error; a Firebase row without the parameters is that row’s error', async () => {
    const before = await users();
    const bad = await post({ firebase_scrypt: { ...FIREBASE_VECTOR.params, base64_signer_key: 'c2hvcnQ=' }, users: [{ email: uniqueEmail('fb'), password_hash: FIREBASE_VECTOR.hash, password_salt: FIREBASE_VECTOR.salt }] });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_request', details: [{ path: 'firebase_scrypt' }] });
    const ndjsonBad = await post(`${JSON.stringify({ firebase_scrypt: { ...FIREBASE_VECTOR.params, rounds: 'eight' } })}\n${JSON.stringify({ email: uniqueEmail('fb') })}`, { contentType: 'application/x-ndjson' });
    expect(ndjsonBad.statusCode).toBe(400);
    const noParams = (await post([{ email: uniqueEmail('fb'), password_hash: FIREBASE_VECTOR.hash, password_salt: FIREBASE_VECTOR.salt }])).json();
    expect(noParams.results[0]).toMatchObject({ status: 'invalid', details: [{ path: 'password_salt' }] });
    const wrongLength = (await post({ firebase_scrypt: FIREBASE_VECTOR.params, users: [{ email: uniqueEmail('fb'), password_hash: 'c2hvcnQ=', password_salt: FIREBASE_VECTOR.salt }] })).json();
    expect(wrongLength.results[0]).toMatchObject({ status: 'invalid', reason: 'unknown_hash_format' });
    expect(await users()).toBe(before);
  });

  it('app memberships, consent to the default scopes, an authenticator-app secret sealed like enrolment seals it, and the events', async () => {
    const other = await makeClient(t);
    const email = uniqueEmail('member');
    const secret = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
    const res = await post([{ email, apps: [{ client_id: other.app.id, consent: true }], totp_secret: 'jbsw y3dp ehpk 3pxp jbsw y3dp ehpk 3pxp' }], { query: `?app=${client.app.id}` });
    expect(res.json().summary.created).toBe(1);
    const user = (await findUserByEmail(t.db, email))!;
    const members = await t.db.selectFrom('app_users').select(['app_id', 'status']).where('user_id', '=', user.id).orderBy('app_id').execute();
    expect(members.map((m) => m.app_id).sort()).toEqual([client.app.id, other.app.id].sort());
    const consents = await t.db.selectFrom('consents').select(['app_id', 'scope']).where('user_id', '=', user.id).execute();
    expect(consents).toEqual([{ app_id: other.app.id, scope: 'email openid profile' }]);
    const factor = await t.db.selectFrom('totp_factors').selectAll().where('user_id', '=', user.id).executeTakeFirstOrThrow();
    expect(factor.secret_sealed).not.toContain(secret);
    expect(new SecretBox(TEST_SECRET_KEY, 'totp').open(factor.secret_sealed)).toBe(secret);
    expect(factor.confirmed_at).not.toBeNull();
    const events = await t.db.selectFrom('events').select(['type', 'data']).where('user_id', '=', user.id).orderBy('id').execute();
    expect(events.map((e) => [e.type, JSON.parse(e.data)])).toEqual([
      ['user.registered', { method: 'import' }],
      ['consent.granted', { scope: 'email openid profile', via: 'import' }],
    ]);

    // An unknown app: that row is invalid (nothing of it written); an unknown ?app is a request error.
    const unknownApp = (await post([{ email: uniqueEmail('noapp'), apps: [{ client_id: 'no-such-app' }] }])).json();
    expect(unknownApp.results[0]).toMatchObject({ status: 'invalid', details: [{ path: 'apps' }] });
    expect((await post([{ email: uniqueEmail('noapp') }], { query: '?app=no-such-app' })).statusCode).toBe(400);
  });

  it("an import's users become user.created webhooks of the apps they join (and consent.granted where consent was given)", async () => {
    const hooked = await makeClient(t);
    const now = t.clock.now();
    await insertWebhookEndpoint(t.db, { id: 'whe_import_test', app_id: hooked.app.id, url: 'https://hooks.example/in', description: null, event_types: '[]', enabled: 1, secret_sealed: 'x', previous_secret_sealed: null, previous_secret_expires_at: null, failing_since: null, disabled_reason: null, disabled_at: null, created_at: now, updated_at: now });
    const [member, outsider] = [uniqueEmail('hooked'), uniqueEmail('outsider')];
    await post([{ email: member, apps: [{ client_id: hooked.app.id, consent: true }] }, { email: outsider }]);
    const memberId = (await findUserByEmail(t.db, member))!.id;
    const deliveries = await t.db.selectFrom('webhook_deliveries').select(['type', 'user_id']).where('endpoint_id', '=', 'whe_import_test').orderBy('id').execute();
    expect(deliveries).toEqual([{ type: 'user.created', user_id: memberId }, { type: 'consent.granted', user_id: memberId }]);
  });
});
