import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { decodeProtectedHeader } from 'jose';
import { MAX_FAILED_ADMIN_TOKENS_PER_MINUTE } from '../../src/plugins/admin-token.js';
import { hashSecret, newSecret } from '../../src/shared/ids.js';
import { findApp } from '../../src/storage/repos/apps.js';
import { insertBrowserSession } from '../../src/storage/repos/browser-sessions.js';
import { findRefreshFamily } from '../../src/storage/repos/grants.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import { epochSeconds } from '../../src/shared/time.js';
import { FrozenClock, TEST_ADMIN_TOKEN, buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders, appBody, bearer } from '../helpers/dev-api.js';
import { quickUser } from '../helpers/members.js';

describe('admin API (/v1/admin)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  describe('authentication', () => {
    it.each([
      ['no Authorization header', {}],
      ['a wrong token', bearer('wrong-admin-token-0123456789')],
      ['the token with one character changed', bearer(`${TEST_ADMIN_TOKEN.slice(0, -1)}x`)],
      ['a prefix of the token', bearer(TEST_ADMIN_TOKEN.slice(0, 8))],
      ['the token as Basic', { authorization: `Basic ${TEST_ADMIN_TOKEN}` }],
    ])('%s → 401 unauthorized', async (_name, headers) => {
      const res = await t.app.inject({ url: '/v1/admin/developers', headers });
      expect(res.statusCode).toBe(401);
      expect(res.json()).toMatchObject({ code: 'unauthorized' });
      expect(res.headers['www-authenticate']).toMatch(/^Bearer/);
    });

    it('the token in the query string is not accepted → 401', async () => {
      const res = await t.app.inject(`/v1/admin/developers?access_token=${TEST_ADMIN_TOKEN}`);
      expect(res.statusCode).toBe(401);
    });

    it('without ADMIN_TOKEN every admin route answers 401', async () => {
      const noAdmin = await buildTestApp({ env: { ADMIN_TOKEN: '' } });
      try {
        for (const [method, url] of [['GET', '/v1/admin/developers'], ['POST', '/v1/admin/keys/rotate'], ['GET', '/v1/admin/users']] as const) {
          const res = await noAdmin.app.inject({ method, url, headers: bearer(TEST_ADMIN_TOKEN) });
          expect(res.statusCode, url).toBe(401);
          expect(res.json()).toMatchObject({ code: 'unauthorized' });
        }
      } finally {
        await noAdmin.close();
      }
    });
  });

  describe('developers', () => {
    it('creates a developer → 201 with a one-time API key that works on /v1/dev', async () => {
      const res = await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email: ' Carol@Example.COM ', name: 'Carol' } });
      expect(res.statusCode).toBe(201);
      const body = res.json();
      expect(body).toMatchObject({ id: expect.stringMatching(/^dev_/), email: 'carol@example.com', name: 'Carol', created_at: expect.any(String) });
      expect(body.api_key).toMatch(/^dk_[A-Za-z0-9_-]{43}$/);
      const row = await t.db.selectFrom('developers').selectAll().where('id', '=', body.id).executeTakeFirstOrThrow();
      expect(row.api_key_hash).toBe(hashSecret(body.api_key));
      expect((await t.app.inject({ url: '/v1/dev/apps', headers: bearer(body.api_key) })).statusCode).toBe(200);

      const list = await t.app.inject({ url: '/v1/admin/developers', headers: adminHeaders });
      expect(list.statusCode).toBe(200);
      const listed = list.json().items.find((d: { id: string }) => d.id === body.id);
      expect(listed).toEqual({ id: body.id, email: 'carol@example.com', name: 'Carol', created_at: body.created_at });
      expect(JSON.stringify(list.json())).not.toContain('api_key');
    });

    it('an email that is taken → 409 conflict', async () => {
      await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email: 'dave@example.com' } });
      const again = await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email: 'DAVE@example.com' } });
      expect(again.statusCode).toBe(409);
      expect(again.json()).toMatchObject({ code: 'conflict' });
    });

    it.each([{}, { email: 'not-an-email' }, { email: 'x@example.com', name: '' }, { email: 'x@example.com', role: 'admin' }])(
      'refuses %j → 400 invalid_request',
      async (payload) => {
        const res = await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload });
        expect(res.statusCode).toBe(400);
        expect(res.json()).toMatchObject({ code: 'invalid_request' });
      },
    );
  });

  describe('users', () => {
    let zed: UserRow;
    beforeAll(async () => {
      // Oldest first, so the listing order (newest first) is the reverse.
      await quickUser(t, { email: 'ann@corp.example', name: 'Ann Lee', created_at: 1000 });
      await quickUser(t, { email: 'bo@home.example', name: 'Bo 100%_real', created_at: 1001, status: 'disabled' });
      await quickUser(t, { email: 'cy@corp.example', name: null, created_at: 1002 });
      zed = await quickUser(t, { email: 'zed@corp.example', name: 'ZED', created_at: 1003 });
    });

    const list = (query: string) => t.app.inject({ url: `/v1/admin/users${query}`, headers: adminHeaders });

    it('lists users newest first with paging fields', async () => {
      const res = await list('?pageSize=2');
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ page: 1, pageSize: 2, total: 4 });
      expect(body.items.map((u: { email: string }) => u.email)).toEqual(['zed@corp.example', 'cy@corp.example']);
      expect(body.items[0]).toEqual({
        id: zed.id,
        email: 'zed@corp.example',
        email_verified: false,
        name: 'ZED',
        phone_number: null,
        birthdate: null,
        created_at: new Date(1003 * 1000).toISOString(),
        status: 'active',
        idp_bound: false,
        deletion_scheduled_at: null,
      });
      const page2 = (await list('?pageSize=2&page=2')).json();
      expect(page2.items.map((u: { email: string }) => u.email)).toEqual(['bo@home.example', 'ann@corp.example']);
      expect((await list('?page=9')).json()).toMatchObject({ items: [], page: 9, total: 4 });
    });

    it('filters by a case-insensitive substring of email or name, and by status', async () => {
      const emails = async (query: string) => (await list(query)).json().items.map((u: { email: string }) => u.email);
      expect(await emails('?q=CORP')).toEqual(['zed@corp.example', 'cy@corp.example', 'ann@corp.example']);
      expect(await emails('?q=zed')).toEqual(['zed@corp.example']);
      expect(await emails('?q=lee')).toEqual(['ann@corp.example']);
      expect(await emails('?q=100%25_')).toEqual(['bo@home.example']);
      expect(await emails('?q=%25')).toEqual(['bo@home.example']);
      expect(await emails('?q=_')).toEqual(['bo@home.example']);
      expect(await emails('?status=disabled')).toEqual(['bo@home.example']);
      expect(await emails('?status=active&q=corp&pageSize=1')).toEqual(['zed@corp.example']);
      expect((await list('?q=corp&status=active')).json().total).toBe(3);
    });

    it.each(['?page=0', '?page=-1', '?page=abc', '?pageSize=0', '?pageSize=101', '?pageSize=2.5', '?status=blocked', '?page=1&page=2'])(
      'refuses %s → 400 invalid_request',
      async (query) => {
        const res = await list(query);
        expect(res.statusCode).toBe(400);
        expect(res.json()).toMatchObject({ code: 'invalid_request' });
      },
    );

    it('disabling a user revokes every grant and browser session at once; enabling restores sign-in only', async () => {
      const dev = (await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email: 'owner@example.com' } })).json();
      const appId = (await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(dev.api_key), payload: appBody() })).json().id;
      const app = (await findApp(t.db, appId))!;
      const user = await quickUser(t, { email: 'victim@example.com' });
      const { response } = await t.app.tokens.issueTokens(t.db, { app, user, scope: 'openid', authTime: t.clock.now(), amr: ['pwd'] });
      const sessionHash = hashSecret(newSecret('bs'));
      const now = t.clock.now();
      await insertBrowserSession(t.db, { id_hash: sessionHash, user_id: user.id, csrf_token: 'x', auth_time: now, data: '{}', created_at: now, last_seen_at: now, expires_at: now + 3600, revoked_at: null });

      const res = await t.app.inject({ method: 'PATCH', url: `/v1/admin/users/${user.id}`, headers: adminHeaders, payload: { status: 'disabled' } });
      expect(res.statusCode).toBe(200);
      expect(res.json()).toMatchObject({ id: user.id, status: 'disabled', idp_bound: false });

      const grants = await t.db.selectFrom('grants').select(['revoked_at', 'revoked_reason']).where('user_id', '=', user.id).execute();
      expect(grants).toEqual([{ revoked_at: expect.any(Number), revoked_reason: 'user_disabled' }]);
      const session = await t.db.selectFrom('browser_sessions').select('revoked_at').where('id_hash', '=', sessionHash).executeTakeFirstOrThrow();
      expect(session.revoked_at).not.toBeNull();
      await expect(t.app.tokens.refresh({ family: await findRefreshFamily(t.db, hashSecret(response.refresh_token)), client: app }, {})).rejects.toMatchObject({ code: 'invalid_grant' });
      expect(await t.app.tokens.checkAccessToken(response.access_token)).toBeNull();

      const enabled = await t.app.inject({ method: 'PATCH', url: `/v1/admin/users/${user.id}`, headers: adminHeaders, payload: { status: 'active' } });
      expect(enabled.json()).toMatchObject({ status: 'active' });
      // Revoked grants stay revoked.
      await expect(t.app.tokens.refresh({ family: await findRefreshFamily(t.db, hashSecret(response.refresh_token)), client: app }, {})).rejects.toMatchObject({ code: 'invalid_grant' });
    });

    it('PATCH of an unknown user → 404; a bad status → 400', async () => {
      const unknown = await t.app.inject({ method: 'PATCH', url: '/v1/admin/users/usr_nope', headers: adminHeaders, payload: { status: 'disabled' } });
      expect(unknown.statusCode).toBe(404);
      expect(unknown.json()).toMatchObject({ code: 'not_found' });
      const bad = await t.app.inject({ method: 'PATCH', url: `/v1/admin/users/${zed.id}`, headers: adminHeaders, payload: { status: 'blocked' } });
      expect(bad.statusCode).toBe(400);
    });
  });

  describe('signing keys', () => {
    it('rotation adds keys; tokens signed before it still verify and the JWKS keeps the old keys', async () => {
      const before = (await t.app.inject('/oauth/jwks')).json().keys.map((k: { kid: string }) => k.kid);
      const oldToken = await t.app.keys.sign({ sub: 'usr_x' }, { alg: 'ES256', typ: 'at+jwt', expiresIn: 900 });

      const res = await t.app.inject({ method: 'POST', url: '/v1/admin/keys/rotate', headers: adminHeaders });
      expect(res.statusCode).toBe(200);
      const { kids } = res.json();
      expect(kids).toHaveLength(2);
      expect(kids.some((kid: string) => before.includes(kid))).toBe(false);

      const after = (await t.app.inject('/oauth/jwks')).json().keys.map((k: { kid: string }) => k.kid);
      expect(after).toEqual(expect.arrayContaining([...before, ...kids]));
      await expect(t.app.keys.verify(oldToken, { typ: 'at+jwt', algorithms: ['ES256'] })).resolves.toMatchObject({ sub: 'usr_x' });

      const newToken = await t.app.keys.sign({ sub: 'usr_y' }, { alg: 'ES256', typ: 'at+jwt', expiresIn: 900 });
      expect(kids).toContain(decodeProtectedHeader(newToken).kid);
      await expect(t.app.keys.verify(newToken, { typ: 'at+jwt', algorithms: ['ES256'] })).resolves.toMatchObject({ sub: 'usr_y' });
    });
  });

  it('sends no CORS headers', async () => {
    const res = await t.app.inject({ url: '/v1/admin/developers', headers: { ...adminHeaders, origin: 'https://a.example' } });
    expect(res.headers['access-control-allow-origin']).toBeUndefined();
  });

  it('never logs the admin token or API keys', async () => {
    expect(t.logs.join('\n')).not.toContain(TEST_ADMIN_TOKEN);
    expect(t.logs.join('\n')).not.toMatch(/dk_[A-Za-z0-9_-]{43}/);
  });
});

describe('retired signing keys', () => {
  it('leave the JWKS once every token they signed can have expired; a token signed with one is then refused', async () => {
    const t = await buildTestApp();
    try {
      // A (forged) long-lived token under the current key: only the key's retention can end it.
      const longLived = await t.app.keys.sign({ sub: 'usr_x' }, { alg: 'ES256', typ: 'at+jwt', expiresIn: 30 * 86400 });
      const oldKid = decodeProtectedHeader(longLived).kid;
      expect((await t.app.inject({ method: 'POST', url: '/v1/admin/keys/rotate', headers: adminHeaders })).statusCode).toBe(200);
      await expect(t.app.keys.verify(longLived, { typ: 'at+jwt', algorithms: ['ES256'] })).resolves.toMatchObject({ sub: 'usr_x' });

      // Retention = the longest access/session lifetime + 60 s.
      t.clock.advance(Math.max(t.config.ttl.accessToken, t.config.ttl.session) + 61);
      const kids = (await t.app.inject('/oauth/jwks')).json().keys.map((k: { kid: string }) => k.kid);
      expect(kids).not.toContain(oldKid);
      await expect(t.app.keys.verify(longLived, { typ: 'at+jwt', algorithms: ['ES256'] })).rejects.toThrow();
    } finally {
      await t.close();
    }
  });
});

describe('admin token guessing', () => {
  it(`is throttled per IP after ${MAX_FAILED_ADMIN_TOKENS_PER_MINUTE} wrong tokens a minute, the right token included`, async () => {
    // A frozen clock: the whole burst is inside one minute however slowly the machine runs it.
    const t = await buildTestApp({ clock: new FrozenClock(epochSeconds()) });
    try {
      const guess = () => t.app.inject({ url: '/v1/admin/developers', headers: bearer('guess-0123456789abcdef') });
      for (let i = 0; i < MAX_FAILED_ADMIN_TOKENS_PER_MINUTE; i++) expect((await guess()).statusCode).toBe(401);
      const limited = await guess();
      expect(limited.statusCode).toBe(429);
      expect(limited.json()).toMatchObject({ code: 'rate_limited' });
      expect((await t.app.inject({ url: '/v1/admin/developers', headers: adminHeaders })).statusCode).toBe(429);
      t.clock.advance(61);
      expect((await t.app.inject({ url: '/v1/admin/developers', headers: adminHeaders })).statusCode).toBe(200);
    } finally {
      await t.close();
    }
  });
});
