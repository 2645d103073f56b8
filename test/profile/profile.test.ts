import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_DIALECT, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';
import type { App } from '../../src/storage/repos/apps.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import { revokeGrantsOfUser } from '../../src/storage/repos/grants.js';
import { StatementRecorder } from '../helpers/statements.js';

describe('profile cache /v1/profile/{userId}', () => {
  let t: TestApp;
  let appA: App;
  let appB: App;
  let alice: UserRow;
  let bob: UserRow;
  let atA: string; // alice @ app A
  let atB: string; // alice @ app B
  let bobA: string; // bob @ app A

  const req = (method: 'GET' | 'PUT' | 'DELETE', userId: string, token: string | null, clientId: string | null, body?: unknown, headers: Record<string, string> = {}) =>
    t.app.inject({
      method,
      url: `/v1/profile/${userId}`,
      headers: {
        ...(token ? { authorization: `Bearer ${token}` } : {}),
        ...(clientId ? { 'x-client-id': clientId } : {}),
        ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        ...headers,
      },
      ...(body !== undefined ? { payload: typeof body === 'string' ? body : JSON.stringify(body) } : {}),
    });

  beforeAll(async () => {
    t = await buildTestApp();
    appA = await makeApp(t.db, { redirectUris: ['https://a.example/cb/'] });
    appB = await makeApp(t.db, { redirectUris: ['https://b.example/cb'] });
    alice = await quickUser(t, { name: 'Alice' });
    bob = await quickUser(t, { name: 'Bob' });
    for (const [app, user] of [[appA, alice], [appB, alice], [appA, bob]] as const) await addMember(t, app, user);
    atA = (await tokensFor(t, appA, alice)).access_token;
    atB = (await tokensFor(t, appB, alice)).access_token;
    bobA = (await tokensFor(t, appA, bob)).access_token;
  });
  afterAll(async () => t.close());

  it('GET before any write is 404 profile_not_found; PUT creates version 1, GET returns it with an ETag', async () => {
    const none = await req('GET', alice.id, atA, appA.id);
    expect(none.statusCode).toBe(404);
    expect(none.json().code).toBe('profile_not_found');

    const put = await req('PUT', alice.id, atA, appA.id, { data: { theme: 'dark', n: 1 } });
    expect(put.statusCode).toBe(200);
    expect(put.json()).toMatchObject({ userId: alice.id, data: { theme: 'dark', n: 1 }, version: 1 });
    expect(put.json().updated_at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(put.headers.etag).toBe('"1"');

    const got = await req('GET', alice.id, atA, appA.id);
    expect(got.statusCode).toBe(200);
    expect(Object.keys(got.json()).sort()).toEqual(['data', 'updated_at', 'userId', 'version']);
    expect(got.headers.etag).toBe('"1"');
    expect(got.headers['content-type']).toMatch(/^application\/json; charset=utf-8/);
    expect(got.headers['x-content-type-options']).toBe('nosniff');
  });

  it('PUT replaces and bumps the version; If-Match compares versions atomically (412 on mismatch)', async () => {
    const v2 = await req('PUT', alice.id, atA, appA.id, { data: { theme: 'light' } }, { 'if-match': '"1"' });
    expect(v2.statusCode).toBe(200);
    expect(v2.json().version).toBe(2);
    const stale = await req('PUT', alice.id, atA, appA.id, { data: { theme: 'stale' } }, { 'if-match': '"1"' });
    expect(stale.statusCode).toBe(412);
    expect(stale.json().code).toBe('precondition_failed');
    const weak = await req('PUT', alice.id, atA, appA.id, { data: { theme: 'weak' } }, { 'if-match': 'W/"2"' });
    expect(weak.statusCode).toBe(412);
    const got = await req('GET', alice.id, atA, appA.id);
    expect(got.json()).toMatchObject({ data: { theme: 'light' }, version: 2 });

    // Two writers holding version 2: exactly one wins.
    const [r1, r2] = await Promise.all([
      req('PUT', alice.id, atA, appA.id, { data: { w: 1 } }, { 'if-match': '"2"' }),
      req('PUT', alice.id, atA, appA.id, { data: { w: 2 } }, { 'if-match': '"2"' }),
    ]);
    expect([r1.statusCode, r2.statusCode].sort()).toEqual([200, 412]);
  });

  it('another user id → 403 forbidden for GET, PUT and DELETE; bob’s data is unchanged', async () => {
    await req('PUT', bob.id, bobA, appA.id, { data: { secret: 'bob' } });
    for (const method of ['GET', 'PUT', 'DELETE'] as const) {
      const res = await req(method, bob.id, atA, appA.id, method === 'PUT' ? { data: { hacked: true } } : undefined);
      expect(res.statusCode).toBe(403);
      expect(res.json().code).toBe('forbidden');
    }
    // A nonexistent id answers exactly like an existing one (no enumeration, item 62).
    const ghost = await req('GET', 'usr_doesnotexist', atA, appA.id);
    const real = await req('GET', bob.id, atA, appA.id);
    expect([ghost.statusCode, ghost.json().code]).toEqual([real.statusCode, real.json().code]);
    const check = await req('GET', bob.id, bobA, appA.id);
    expect(check.json().data).toEqual({ secret: 'bob' });
  });

  it('path variants never reach another user (item 78)', async () => {
    const variants = [
      `${bob.id}%00`,
      bob.id.toUpperCase(),
      `${alice.id}/../${bob.id}`,
      `${alice.id}%2F..%2F${bob.id}`,
      `${alice.id};${bob.id}`,
      `%20${bob.id}`,
      `${bob.id}/`,
      '123',
      '00000000-0000-0000-0000-000000000000',
    ];
    for (const v of variants) {
      const res = await t.app.inject({ method: 'GET', url: `/v1/profile/${v}`, headers: { authorization: `Bearer ${atA}`, 'x-client-id': appA.id } });
      expect([403, 404], v).toContain(res.statusCode);
      expect(res.body).not.toContain('"secret"');
    }
    const withQuery = await t.app.inject({ method: 'GET', url: `/v1/profile/${alice.id}?userId=${bob.id}`, headers: { authorization: `Bearer ${atA}`, 'x-client-id': appA.id } });
    expect(withQuery.statusCode).toBe(200);
    expect(withQuery.json().userId).toBe(alice.id);
    expect(withQuery.body).not.toContain('"secret"');
  });

  it('apps cannot see each other’s profile (per-app namespace)', async () => {
    const b = await req('GET', alice.id, atB, appB.id);
    expect(b.statusCode).toBe(404);
    await req('PUT', alice.id, atB, appB.id, { data: { app: 'B' } });
    const a = await req('GET', alice.id, atA, appA.id);
    expect(a.json().data.app).toBeUndefined();
    // Deleting at B leaves A's document.
    expect((await req('DELETE', alice.id, atB, appB.id)).statusCode).toBe(204);
    expect((await req('GET', alice.id, atA, appA.id)).statusCode).toBe(200);
  });

  it('X-Client-Id: missing → 400, duplicated → 400, another app → 403 client_mismatch', async () => {
    const missing = await req('GET', alice.id, atA, null);
    expect(missing.statusCode).toBe(400);
    expect(missing.json().code).toBe('invalid_request');
    const dup = await t.app.inject({
      method: 'GET',
      url: `/v1/profile/${alice.id}`,
      headers: { authorization: `Bearer ${atA}`, 'x-client-id': [appA.id, appB.id] },
    });
    expect(dup.statusCode).toBe(400);
    const dupSame = await t.app.inject({
      method: 'GET',
      url: `/v1/profile/${alice.id}`,
      headers: { authorization: `Bearer ${atA}`, 'x-client-id': [appA.id, appA.id] },
    });
    expect(dupSame.statusCode).toBe(400);
    const mismatch = await req('GET', alice.id, atA, appB.id);
    expect(mismatch.statusCode).toBe(403);
    expect(mismatch.json().code).toBe('client_mismatch');
  });

  it('bad or missing bearer → 401 with WWW-Authenticate, checked before anything else', async () => {
    const none = await req('GET', alice.id, null, appA.id);
    expect(none.statusCode).toBe(401);
    expect(none.headers['www-authenticate']).toMatch(/^Bearer/);
    const bad = await req('PUT', alice.id, 'not.a.jwt', null, 'text', { 'content-type': 'text/plain' });
    expect(bad.statusCode).toBe(401);
    expect(bad.json().code).toBe('unauthorized');
    expect(bad.headers['www-authenticate']).toContain('error="invalid_token"');
    // A tampered signature.
    const [h, p] = atA.split('.');
    const forged = await req('GET', alice.id, `${h}.${p}.AAAA`, appA.id);
    expect(forged.statusCode).toBe(401);
    // A refresh token or a session JWT is not an access token.
    const { refresh_token: rt, grantId } = await tokensFor(t, appA, alice);
    expect((await req('GET', alice.id, rt, appA.id)).statusCode).toBe(401);
    const session = await t.app.tokens.mintSession({ userId: alice.id, appId: appA.id, grantId });
    expect((await req('GET', alice.id, session, appA.id)).statusCode).toBe(401);
  });

  it('feature_disabled when the app lacks Profile or Auth', async () => {
    for (const features of [{ auth: true, profile: false }, { auth: false, profile: true }]) {
      const app = await makeApp(t.db, { features });
      await addMember(t, app, alice);
      const token = (await tokensFor(t, app, alice)).access_token;
      const res = await req('GET', alice.id, token, app.id);
      expect(res.statusCode).toBe(403);
      expect(res.json().code).toBe('feature_disabled');
    }
  });

  it('size: exactly 64 KiB of serialized data is accepted, one byte more is 413', async () => {
    const wrap = (len: number) => {
      // {"k":"xxx…"} is 8 bytes + the string.
      return { k: 'x'.repeat(len - 8) };
    };
    const exact = wrap(64 * 1024);
    expect(Buffer.byteLength(JSON.stringify(exact))).toBe(65536);
    const ok = await req('PUT', alice.id, atA, appA.id, { data: exact });
    expect(ok.statusCode).toBe(200);
    const before = (await req('GET', alice.id, atA, appA.id)).json();
    const over = await req('PUT', alice.id, atA, appA.id, { data: wrap(64 * 1024 + 1) });
    expect(over.statusCode).toBe(413);
    expect(over.json().code).toBe('payload_too_large');
    // Far over the route limit: still a clean 413, and the stored document is intact.
    const huge = await req('PUT', alice.id, atA, appA.id, { data: wrap(10 * 64 * 1024) });
    expect(huge.statusCode).toBe(413);
    expect(huge.json().code).toBe('payload_too_large');
    const after = (await req('GET', alice.id, atA, appA.id)).json();
    expect(after.version).toBe(before.version);
  });

  it('content types: text/plain, form, charset=utf-16 and none → 415', async () => {
    const body = JSON.stringify({ data: { a: 1 } });
    for (const type of ['text/plain', 'application/x-www-form-urlencoded', 'application/json; charset=utf-16', 'multipart/form-data; boundary=x']) {
      const res = await req('PUT', alice.id, atA, appA.id, undefined, { 'content-type': type });
      const withBody = await t.app.inject({
        method: 'PUT',
        url: `/v1/profile/${alice.id}`,
        headers: { authorization: `Bearer ${atA}`, 'x-client-id': appA.id, 'content-type': type },
        payload: type.startsWith('application/x-www') ? 'data=1' : body,
      });
      expect(withBody.statusCode, type).toBe(415);
      expect(withBody.json().code).toBe('unsupported_media_type');
      expect(res.statusCode).toBeLessThan(500);
    }
    const noType = await t.app.inject({ method: 'PUT', url: `/v1/profile/${alice.id}`, headers: { authorization: `Bearer ${atA}`, 'x-client-id': appA.id }, payload: Buffer.from(body) });
    expect([400, 415]).toContain(noType.statusCode);
  });

  it('shape: exactly {"data": object}; nesting 32 ok, 33 → 400; __proto__ / constructor → 400', async () => {
    for (const bad of [{}, { data: [] }, { data: null }, { data: 'x' }, { data: {}, extra: 1 }, { userId: bob.id, data: {} }, [], 'str', 1]) {
      const res = await req('PUT', alice.id, atA, appA.id, bad);
      expect(res.statusCode, JSON.stringify(bad)).toBe(400);
    }
    const nest = (levels: number) => {
      let v: Record<string, unknown> = {};
      for (let i = 1; i < levels; i++) v = { a: v };
      return v;
    };
    expect((await req('PUT', alice.id, atA, appA.id, { data: nest(32) })).statusCode).toBe(200);
    const deep = await req('PUT', alice.id, atA, appA.id, { data: nest(33) });
    expect(deep.statusCode).toBe(400);
    expect(deep.json().code).toBe('invalid_request');
    // Arrays count as levels too; 50,000 levels must not crash the process.
    const arrays = `{"data":{"a":${'['.repeat(32)}${']'.repeat(32)}}}`; // data=1, 32 arrays = levels 2..33
    expect((await req('PUT', alice.id, atA, appA.id, arrays)).statusCode).toBe(400);
    const arrays32 = `{"data":{"a":${'['.repeat(31)}${']'.repeat(31)}}}`;
    expect((await req('PUT', alice.id, atA, appA.id, arrays32)).statusCode).toBe(200);
    const hostile = `{"data":${'{"a":'.repeat(12000)}1${'}'.repeat(12000)}}`;
    expect((await req('PUT', alice.id, atA, appA.id, hostile)).statusCode).toBe(400);

    for (const raw of ['{"data":{"__proto__":{"isAdmin":true}}}', '{"__proto__":{"isAdmin":true}}', '{"data":{"constructor":{"prototype":{"x":1}}}}', '{"data":{"a":{"constructor":1}}}']) {
      const res = await req('PUT', alice.id, atA, appA.id, raw);
      expect(res.statusCode, raw).toBe(400);
    }
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('stored script stays inert JSON', async () => {
    const res = await req('PUT', alice.id, atA, appA.id, { data: { name: '<script>alert(1)</script>' } });
    expect(res.statusCode).toBe(200);
    const got = await req('GET', alice.id, atA, appA.id);
    expect(got.headers['content-type']).toMatch(/^application\/json/);
    expect(got.json().data.name).toBe('<script>alert(1)</script>');
  });

  it('DELETE → 204, GET → 404, DELETE again → 204; events recorded', async () => {
    await req('PUT', alice.id, atA, appA.id, { data: { x: 1 } });
    expect((await req('DELETE', alice.id, atA, appA.id)).statusCode).toBe(204);
    expect((await req('GET', alice.id, atA, appA.id)).statusCode).toBe(404);
    expect((await req('DELETE', alice.id, atA, appA.id)).statusCode).toBe(204);
    const events = await t.db.selectFrom('events').select(['type', 'data']).where('app_id', '=', appA.id).where('user_id', '=', alice.id).execute();
    expect(events.map((e) => e.type)).toContain('profile.updated');
    expect(events.filter((e) => e.type === 'profile.deleted')).toHaveLength(1);
    for (const e of events) expect(e.data).not.toContain('script');
  });

  it('a read is one statement, the grant\'s liveness included', async () => {
    const recorder = new StatementRecorder();
    const r = await buildTestApp({ withDb: (db) => db.withPlugin(recorder) });
    try {
      await r.app.mailer.stop(); // no background delivery mixed into the recording
      const app = await makeApp(r.db, {});
      const user = await quickUser(r);
      await addMember(r, app, user);
      const { access_token } = await tokensFor(r, app, user);
      const put = await r.app.inject({ method: 'PUT', url: `/v1/profile/${user.id}`, headers: { authorization: `Bearer ${access_token}`, 'x-client-id': app.id }, payload: { data: { n: 1 } } });
      expect(put.statusCode).toBe(200);
      let res: Awaited<ReturnType<typeof r.app.inject>> | undefined;
      const seen = await recorder.during(async () => {
        res = await r.app.inject({ url: `/v1/profile/${user.id}`, headers: { authorization: `Bearer ${access_token}`, 'x-client-id': app.id } });
      });
      expect(res!.statusCode).toBe(200);
      expect(res!.json().data).toEqual({ n: 1 });
      // On PostgreSQL the read is its batch's statement (raw SQL over the batch's grant ids).
      expect(seen).toEqual([TEST_DIALECT === 'postgres' ? 'rawnode -' : 'select grants']);
    } finally {
      await r.close();
    }
  });

  it('concurrent reads: on PostgreSQL one statement for all of them, each answered with its own document; a revoked grant among them refused', async () => {
    const recorder = new StatementRecorder();
    const r = await buildTestApp({ withDb: (db) => db.withPlugin(recorder) });
    try {
      await r.app.mailer.stop();
      const app = await makeApp(r.db, {});
      const readers = [];
      for (const n of [1, 2, 3]) {
        const user = await quickUser(r);
        await addMember(r, app, user);
        const { access_token, refresh_token } = await tokensFor(r, app, user);
        const headers = { authorization: `Bearer ${access_token}`, 'x-client-id': app.id };
        expect((await r.app.inject({ method: 'PUT', url: `/v1/profile/${user.id}`, headers, payload: { data: { n } } })).statusCode).toBe(200);
        readers.push({ user, n, headers, refresh_token });
      }
      // Each token read once already (its signature checked): the reads below reach the grant read together.
      for (const { user, headers } of readers) expect((await r.app.inject({ url: `/v1/profile/${user.id}`, headers })).statusCode).toBe(200);
      const revoked = readers[2]!;
      await r.app.tokens.revokeRefreshToken(revoked.refresh_token, app.id);
      const reads = [...readers, ...readers];
      let answers: Array<Awaited<ReturnType<typeof r.app.inject>>> = [];
      const seen = await recorder.during(async () => {
        answers = await Promise.all(reads.map(({ user, headers }) => r.app.inject({ url: `/v1/profile/${user.id}`, headers })));
      });
      reads.forEach(({ n }, i) => {
        if (n === revoked.n) expect(answers[i]!.statusCode).toBe(401);
        else expect(answers[i]!.json().data).toEqual({ n });
      });
      expect(seen).toEqual(TEST_DIALECT === 'postgres' ? ['rawnode -'] : Array(reads.length).fill('select grants'));
    } finally {
      await r.close();
    }
  });

  it('a revoked grant (logout / blocking) → 401 at once', async () => {
    const user = await quickUser(t);
    await addMember(t, appA, user);
    const tokens = await tokensFor(t, appA, user);
    expect((await req('PUT', user.id, tokens.access_token, appA.id, { data: { a: 1 } })).statusCode).toBe(200);
    await t.app.tokens.revokeRefreshToken(tokens.refresh_token, appA.id);
    const afterLogout = await req('GET', user.id, tokens.access_token, appA.id);
    expect(afterLogout.statusCode).toBe(401);

    const again = await tokensFor(t, appA, user);
    await revokeGrantsOfUser(t.db, user.id, t.clock.now(), 'blocked', appA.id);
    expect((await req('GET', user.id, again.access_token, appA.id)).statusCode).toBe(401);
  });

  it('CORS: the app’s redirect-URI origins are allowed, others get no Access-Control-Allow-Origin', async () => {
    const ok = await req('GET', bob.id, bobA, appA.id, undefined, { origin: 'https://a.example' });
    expect(ok.headers['access-control-allow-origin']).toBe('https://a.example');
    const no = await req('GET', bob.id, bobA, appA.id, undefined, { origin: 'https://evil.example' });
    expect(no.headers['access-control-allow-origin']).toBeUndefined();
    const pre = await t.app.inject({ method: 'OPTIONS', url: `/v1/profile/${bob.id}`, headers: { origin: 'https://b.example', 'access-control-request-method': 'PUT' } });
    expect(pre.statusCode).toBe(204);
    expect(pre.headers['access-control-allow-origin']).toBe('https://b.example');
    expect(pre.headers['access-control-allow-headers']).toContain('X-Client-Id');
  });
});
