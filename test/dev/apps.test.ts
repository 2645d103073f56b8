import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE } from '../../src/dev/auth.js';
import { hashSecret } from '../../src/shared/ids.js';
import { epochSeconds } from '../../src/shared/time.js';
import { FrozenClock, TEST_ADMIN_TOKEN, buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { ACCEPTED_REDIRECT_URIS, REFUSED_REDIRECT_URIS } from './redirect-uri-cases.js';

describe('developer apps API (/v1/dev/apps)', () => {
  let t: TestApp;
  let alice: { id: string; apiKey: string };
  let bob: { id: string; apiKey: string };

  beforeAll(async () => {
    t = await buildTestApp();
    alice = await createDeveloperViaApi(t);
    bob = await createDeveloperViaApi(t);
  });
  afterAll(async () => t.close());

  const create = (key: string, body: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(key), payload: body });

  describe('authentication', () => {
    it('without a key → 401 unauthorized with a Bearer challenge', async () => {
      const res = await t.app.inject('/v1/dev/apps');
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: 'unauthorized' });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    });

    it.each([
      ['an unknown key', { authorization: 'Bearer dk_unknown' }],
      ['a Basic credential', { authorization: `Basic ${Buffer.from('a:b').toString('base64')}` }],
      ['the admin token', { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }],
      ['an empty bearer', { authorization: 'Bearer ' }],
    ])('with %s → 401', async (_name, headers) => {
      const res = await t.app.inject({ url: '/v1/dev/apps', headers });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: 'unauthorized' });
    });

    it('a valid key in ?api_key= is not accepted → 401', async () => {
      const res = await t.app.inject(`/v1/dev/apps?api_key=${encodeURIComponent(alice.apiKey)}`);
      expect(res.statusCode).toBe(401);
    });

    it('sends no CORS headers', async () => {
      const res = await t.app.inject({ url: '/v1/dev/apps', headers: { ...bearer(alice.apiKey), origin: 'https://a.example' } });
      expect(res.statusCode).toBe(200);
      expect(res.headers['access-control-allow-origin']).toBeUndefined();
    });
  });

  describe('create', () => {
    it('a public app → 201 with id = client_id and no secret', async () => {
      const res = await create(alice.apiKey, appBody({ name: 'Web', required_fields: ['name', 'birthdate'], allowed_origins: ['https://spa.example'] }));
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body.id).toMatch(/^app_/);
      expect(body.client_id).toBe(body.id);
      expect(body).toMatchObject({
        name: 'Web',
        type: 'public',
        redirect_uris: ['https://a.example/cb'],
        allowed_origins: ['https://spa.example'],
        features: { auth: true, profile: false },
        required_fields: ['name', 'birthdate'],
        disabled: false,
      });
      expect(body.created_at).toMatch(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z$/);
      expect(body).not.toHaveProperty('client_secret');
      const row = await t.db.selectFrom('apps').selectAll().where('id', '=', body.id).executeTakeFirstOrThrow();
      expect(row.client_secret_hash).toBeNull();
      expect(row.developer_id).toBe(alice.id);
    });

    it('a confidential app → its client_secret once; only the hash is stored', async () => {
      const res = await create(alice.apiKey, appBody({ type: 'confidential' }));
      expect(res.statusCode).toBe(201);
      const { id, client_secret: secret } = res.json();
      expect(secret).toMatch(/^cs_[A-Za-z0-9_-]{43}$/);
      const row = await t.db.selectFrom('apps').selectAll().where('id', '=', id).executeTakeFirstOrThrow();
      expect(row.client_secret_hash).toBe(hashSecret(secret));
      expect(JSON.stringify(row)).not.toContain(secret);
      expect((await t.app.inject({ url: `/v1/dev/apps/${id}`, headers: bearer(alice.apiKey) })).json()).not.toHaveProperty('client_secret');
    });

    it('defaults features to auth only and required_fields to none', async () => {
      const res = await create(alice.apiKey, { name: 'Minimal', redirect_uris: ['https://a.example/cb'], type: 'public' });
      expect(res.statusCode).toBe(201);
      expect(res.json()).toMatchObject({ features: { auth: true, profile: false }, required_fields: [], allowed_origins: [] });
    });

    it.each(ACCEPTED_REDIRECT_URIS)('accepts redirect URI %s', async (uri) => {
      const res = await create(alice.apiKey, appBody({ redirect_uris: [uri] }));
      expect(res.statusCode).toBe(201);
      expect(res.json().redirect_uris).toEqual([uri]);
    });

    it.each(REFUSED_REDIRECT_URIS)('refuses redirect URI %j with 400 invalid_request naming the entry', async (uri, reason) => {
      const res = await create(alice.apiKey, appBody({ redirect_uris: ['https://ok.example/cb', uri] }));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request', details: [{ path: 'body.redirect_uris.1', message: expect.stringMatching(reason) }] });
    });

    it('refuses more than 20 redirect URIs and duplicates', async () => {
      const many = Array.from({ length: 21 }, (_, i) => `https://a.example/cb${i}`);
      const tooMany = await create(alice.apiKey, appBody({ redirect_uris: many }));
      expect(tooMany.statusCode).toBe(400);
      expect(tooMany.json().details).toEqual([{ path: 'body.redirect_uris', message: expect.stringMatching(/at most 20/) }]);
      const twice = await create(alice.apiKey, appBody({ redirect_uris: ['https://a.example/cb', 'https://a.example/cb'] }));
      expect(twice.statusCode).toBe(400);
      expect(twice.json().details).toEqual([{ path: 'body.redirect_uris.1', message: 'duplicate of entry 0' }]);
    });

    it.each([
      ['a missing name', { name: undefined }],
      ['an empty name', { name: '  ' }],
      ['an unknown type', { type: 'spa' }],
      ['redirect_uris not an array', { redirect_uris: 'https://a.example/cb' }],
      ['an unknown required field', { required_fields: ['password'] }],
      ['a repeated required field', { required_fields: ['name', 'name'] }],
      ['a non-boolean feature', { features: { auth: 'yes', profile: false } }],
      ['an allowed origin with a path', { allowed_origins: ['https://spa.example/app'] }],
      ['an http non-loopback allowed origin', { allowed_origins: ['http://spa.example'] }],
      ['an unknown field', { owner: 'someone-else' }],
    ])('refuses %s → 400 invalid_request', async (_name, overrides) => {
      const res = await create(alice.apiKey, appBody(overrides));
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request', details: expect.any(Array) });
    });
  });

  describe('read, update, delete, rotate', () => {
    it('lists only the developer’s own apps, newest first', async () => {
      const mine = (await create(bob.apiKey, appBody({ name: 'Bob 1' }))).json();
      const newer = (await create(bob.apiKey, appBody({ name: 'Bob 2' }))).json();
      const list = await t.app.inject({ url: '/v1/dev/apps', headers: bearer(bob.apiKey) });
      expect(list.statusCode).toBe(200);
      expect(list.json().items.map((a: { id: string }) => a.id)).toEqual([newer.id, mine.id]);
    });

    it('reads, patches and deletes its own app', async () => {
      const { id } = (await create(alice.apiKey, appBody())).json();
      const path = `/v1/dev/apps/${id}`;
      expect((await t.app.inject({ url: path, headers: bearer(alice.apiKey) })).json()).toMatchObject({ id, client_id: id, name: 'My app' });

      const patched = await t.app.inject({
        method: 'PATCH',
        url: path,
        headers: bearer(alice.apiKey),
        payload: { name: 'Renamed', redirect_uris: ['https://b.example/cb', 'com.example.app://cb'], features: { profile: true }, disabled: true },
      });
      expect(patched.statusCode).toBe(200);
      expect(patched.json()).toMatchObject({
        id,
        name: 'Renamed',
        redirect_uris: ['https://b.example/cb', 'com.example.app://cb'],
        features: { auth: true, profile: true },
        disabled: true,
      });
      expect((await t.app.inject({ url: path, headers: bearer(alice.apiKey) })).json()).toMatchObject({ name: 'Renamed', disabled: true });

      const deleted = await t.app.inject({ method: 'DELETE', url: path, headers: bearer(alice.apiKey) });
      expect(deleted.statusCode).toBe(204);
      expect((await t.app.inject({ url: path, headers: bearer(alice.apiKey) })).statusCode).toBe(404);
    });

    it('PATCH validates like create and cannot change the type', async () => {
      const { id } = (await create(alice.apiKey, appBody())).json();
      const badUri = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(alice.apiKey), payload: { redirect_uris: ['https://a.example/cb#x'] } });
      expect(badUri.statusCode).toBe(400);
      expect(badUri.json().details).toEqual([{ path: 'body.redirect_uris.0', message: expect.stringMatching(/fragment/) }]);
      const typeChange = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(alice.apiKey), payload: { type: 'confidential' } });
      expect(typeChange.statusCode).toBe(400);
    });

    it('rotates a confidential app’s secret: the new hash replaces the old', async () => {
      const created = (await create(alice.apiKey, appBody({ type: 'confidential' }))).json();
      const res = await t.app.inject({ method: 'POST', url: `/v1/dev/apps/${created.id}/secret`, headers: bearer(alice.apiKey) });
      expect(res.statusCode).toBe(200);
      const rotated = res.json();
      expect(rotated.client_secret).toMatch(/^cs_/);
      expect(rotated.client_secret).not.toBe(created.client_secret);
      const row = await t.db.selectFrom('apps').select('client_secret_hash').where('id', '=', created.id).executeTakeFirstOrThrow();
      expect(row.client_secret_hash).toBe(hashSecret(rotated.client_secret));
    });

    it('refuses to rotate a public app’s secret → 400', async () => {
      const { id } = (await create(alice.apiKey, appBody())).json();
      const res = await t.app.inject({ method: 'POST', url: `/v1/dev/apps/${id}/secret`, headers: bearer(alice.apiKey) });
      expect(res.statusCode).toBe(400);
      expect(res.json()).toMatchObject({ code: 'invalid_request' });
    });

    it('another developer’s app is 404 not_found on every route, and stays untouched', async () => {
      const { id } = (await create(alice.apiKey, appBody({ type: 'confidential' }))).json();
      const asBob = bearer(bob.apiKey);
      const attempts = [
        { method: 'GET' as const, url: `/v1/dev/apps/${id}` },
        { method: 'PATCH' as const, url: `/v1/dev/apps/${id}`, payload: { name: 'Hijacked' } },
        { method: 'DELETE' as const, url: `/v1/dev/apps/${id}` },
        { method: 'POST' as const, url: `/v1/dev/apps/${id}/secret` },
      ];
      for (const attempt of attempts) {
        const res = await t.app.inject({ ...attempt, headers: asBob });
        expect(res.statusCode, `${attempt.method} ${attempt.url}`).toBe(404);
        expect(res.json()).toMatchObject({ code: 'not_found' });
      }
      expect((await t.app.inject({ url: `/v1/dev/apps/${id}`, headers: bearer(alice.apiKey) })).json()).toMatchObject({ name: 'My app' });
    });

    it('an unknown app id → 404 not_found', async () => {
      const res = await t.app.inject({ url: '/v1/dev/apps/app_nope', headers: bearer(alice.apiKey) });
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'not_found' });
    });
  });

  it('never logs API keys or client secrets', async () => {
    const { client_secret: secret } = (await create(alice.apiKey, appBody({ type: 'confidential' }))).json();
    const logs = t.logs.join('\n');
    expect(logs).not.toContain(alice.apiKey);
    expect(logs).not.toContain(bob.apiKey);
    expect(logs).not.toContain(secret);
  });
});

describe('developer key guessing', () => {
  it(`is throttled per IP after ${MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE} wrong keys a minute, a right key included`, async () => {
    // A frozen clock: the whole burst is inside one minute however slowly the machine runs it.
    const t = await buildTestApp({ clock: new FrozenClock(epochSeconds()) });
    try {
      const { apiKey } = await createDeveloperViaApi(t);
      const guess = () => t.app.inject({ url: '/v1/dev/apps', headers: bearer(`dk_guess${Math.random()}`) });
      for (let i = 0; i < MAX_FAILED_DEVELOPER_KEYS_PER_MINUTE; i++) expect((await guess()).statusCode).toBe(401);
      const limited = await guess();
      expect(limited.statusCode).toBe(429);
      expect(limited.json()).toMatchObject({ code: 'rate_limited', retry_after: expect.any(Number) });
      expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
      expect((await t.app.inject({ url: '/v1/dev/apps', headers: bearer(apiKey) })).statusCode).toBe(429);
      t.clock.advance(61);
      expect((await t.app.inject({ url: '/v1/dev/apps', headers: bearer(apiKey) })).statusCode).toBe(200);
      expect((await guess()).statusCode).toBe(401);
    } finally {
      await t.close();
    }
  });
});
