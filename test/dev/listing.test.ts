import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';
import type { App } from '../../src/storage/repos/apps.js';
import type { UserRow } from '../../src/storage/repos/users.js';
import { updateUser } from '../../src/storage/repos/users.js';
import { hashSecret, newId } from '../../src/shared/ids.js';
import { findRefreshFamily } from '../../src/storage/repos/grants.js';

describe('developer user listing GET /v1/dev/apps/{id}/users', () => {
  let t: TestApp;
  let dev: Awaited<ReturnType<typeof makeDeveloper>>;
  let app: App;
  let otherApp: App;
  const users: UserRow[] = []; // users[i] joined at base + i: users[24] is the newest
  let base: number;

  const list = (query = '', appId = app.id, key = dev.apiKey) =>
    t.app.inject({ method: 'GET', url: `/v1/dev/apps/${appId}/users${query}`, headers: { authorization: `Bearer ${key}` } });

  beforeAll(async () => {
    t = await buildTestApp();
    dev = await makeDeveloper(t.db);
    app = await makeApp(t.db, { developerId: dev.id });
    otherApp = await makeApp(t.db); // another developer's
    base = t.clock.now() - 1000;
    for (let i = 0; i < 25; i++) {
      const user = await quickUser(t, {
        email: i === 7 ? 'Zed.Special@Example.org'.toLowerCase() : `member${String(i).padStart(2, '0')}@example.com`,
        name: i === 3 ? 'Ünïcode Müller' : i === 11 ? 'Special Agent' : `Member ${i}`,
        email_verified: i % 2,
      });
      users.push(user);
      await addMember(t, app, user, base + i);
    }
    // A user of the other app only: never listed here.
    const stranger = await quickUser(t, { email: 'stranger@example.com', name: 'Stranger' });
    await addMember(t, otherApp, stranger);
    // idp-bound user
    await t.db.insertInto('provider_identities').values({ id: newId('pid'), user_id: users[5]!.id, issuer: 'https://idp.test', subject: 's5', email: null, created_at: base }).execute();
  });
  afterAll(async () => t.close());

  it('pages newest first with an exact total and exactly the documented fields', async () => {
    const p1 = await list();
    expect(p1.statusCode).toBe(200);
    const b1 = p1.json();
    expect(b1).toMatchObject({ page: 1, pageSize: 20, total: 25 });
    expect(b1.items).toHaveLength(20);
    expect(b1.items[0].id).toBe(users[24]!.id);
    expect(Object.keys(b1.items[0]).sort()).toEqual(['created_at', 'deletion_scheduled_at', 'email', 'email_verified', 'id', 'idp_bound', 'last_login_at', 'name', 'status'].sort());
    const p2 = (await list('?page=2')).json();
    expect(p2.items.map((u: { id: string }) => u.id)).toEqual(users.slice(0, 5).reverse().map((u) => u.id));
    expect(p2.total).toBe(25);
    const p3 = (await list('?page=3')).json();
    expect(p3).toMatchObject({ items: [], total: 25, page: 3 });
    const small = (await list('?pageSize=7&page=4')).json();
    expect(small.items.map((u: { id: string }) => u.id)).toEqual([users[3]!.id, users[2]!.id, users[1]!.id, users[0]!.id]);
    const all = [...b1.items, ...p2.items].map((u: { id: string }) => u.id);
    expect(new Set(all).size).toBe(25);
    expect(JSON.stringify(b1)).not.toMatch(/password|hash|stranger/i);
    const bound = [...b1.items, ...p2.items].find((u: { id: string }) => u.id === users[5]!.id);
    expect(bound.idp_bound).toBe(true);
    expect(bound.created_at).toBe(new Date((base + 5) * 1000).toISOString());
  });

  it('q matches email or name, case-insensitively, as a substring', async () => {
    const byEmail = (await list('?q=ZED.SPECIAL')).json();
    expect(byEmail.items.map((u: { id: string }) => u.id)).toEqual([users[7]!.id]);
    expect(byEmail.total).toBe(1);
    const both = (await list('?q=special')).json();
    expect(both.total).toBe(2);
    expect(both.items.map((u: { id: string }) => u.id)).toEqual([users[11]!.id, users[7]!.id]);
    const short = (await list('?q=ZE')).json(); // under 3 characters: still exact
    expect(short.items.map((u: { id: string }) => u.id)).toContain(users[7]!.id);
    const name = (await list('?q=member%201')).json(); // "Member 1", "Member 10".."Member 19"
    expect(name.total).toBe(11 - 1); // Member 11 is "Special Agent"
    expect((await list('?q=member0&pageSize=3')).json()).toMatchObject({ total: 9, pageSize: 3 }); // member00..09 but 07
    const like = (await list('?q=%25')).json(); // a literal %, not a wildcard
    expect(like.total).toBe(0);
    const underscore = (await list('?q=_')).json();
    expect(underscore.total).toBe(0);
    const quote = await list(`?q=${encodeURIComponent('" OR 1=1 --')}`);
    expect(quote.statusCode).toBe(200);
    expect(quote.json().total).toBe(0);
    expect((await list('?q=stranger')).json().total).toBe(0);
  });

  it('status filters: active, blocked (by the developer), disabled (platform-wide)', async () => {
    const block = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}/users/${users[0]!.id}`, headers: { authorization: `Bearer ${dev.apiKey}` }, payload: { status: 'blocked' } });
    expect(block.statusCode).toBe(200);
    expect(block.json()).toMatchObject({ id: users[0]!.id, status: 'blocked' });
    await updateUser(t.db, users[1]!.id, { status: 'disabled' });
    expect((await list('?status=blocked')).json()).toMatchObject({ total: 1, items: [{ id: users[0]!.id, status: 'blocked' }] });
    expect((await list('?status=disabled')).json()).toMatchObject({ total: 1, items: [{ id: users[1]!.id, status: 'disabled' }] });
    expect((await list('?status=active')).json().total).toBe(23);
    expect((await list()).json().total).toBe(25);
    expect((await list('?status=active&q=member0')).json().total).toBe(7); // minus blocked 00 and disabled 01
    // Renames and email changes reach the search index at once.
    await updateUser(t.db, users[2]!.id, { name: 'Renamed Person', email: 'renamed@example.net' });
    expect((await list('?q=renamed')).json().items.map((u: { id: string }) => u.id)).toEqual([users[2]!.id]);
    expect((await list('?q=member02')).json().total).toBe(0);
    // Unblock / re-enable restore the counts.
    await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}/users/${users[0]!.id}`, headers: { authorization: `Bearer ${dev.apiKey}` }, payload: { status: 'active' } });
    await updateUser(t.db, users[1]!.id, { status: 'active' });
    expect((await list('?status=active')).json().total).toBe(25);
  });

  it('out-of-range or malformed parameters → 400', async () => {
    for (const q of ['?pageSize=0', '?pageSize=101', '?pageSize=abc', '?pageSize=-1', '?page=0', '?page=1.5', '?status=gone', '?q=', '?limit=1000000', `?q=${'x'.repeat(101)}`, '?q=%0A']) {
      const res = await list(q);
      expect(res.statusCode, q).toBe(400);
      expect(res.json().code).toBe('invalid_request');
    }
    expect((await list('?pageSize=100')).statusCode).toBe(200);
  });

  it('another developer’s app and a missing app answer the same 404; no key / bad key → 401', async () => {
    const other = await list('', otherApp.id);
    const missing = await list('', 'app_doesnotexist');
    expect(other.statusCode).toBe(404);
    expect(other.json()).toEqual(missing.json());
    expect((await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${app.id}/users` })).statusCode).toBe(401);
    expect((await list('', app.id, 'dk_wrong')).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${app.id}/users?api_key=${dev.apiKey}` })).statusCode).toBe(401);
  });
});

describe('blocking PATCH /v1/dev/apps/{id}/users/{userId}', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('revokes the app’s grants at once (refresh → invalid_grant, access token → 401), other apps unaffected; event recorded', async () => {
    const dev = await makeDeveloper(t.db);
    const app = await makeApp(t.db, { developerId: dev.id });
    const other = await makeApp(t.db);
    const user = await quickUser(t);
    await addMember(t, app, user);
    await addMember(t, other, user);
    const mine = await tokensFor(t, app, user);
    const theirs = await tokensFor(t, other, user);
    const res = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}/users/${user.id}`, headers: { authorization: `Bearer ${dev.apiKey}` }, payload: { status: 'blocked' } });
    expect(res.statusCode).toBe(200);
    expect(res.json().status).toBe('blocked');
    await expect(t.app.tokens.refresh({ family: await findRefreshFamily(t.db, hashSecret(mine.refresh_token)), client: app }, {})).rejects.toMatchObject({ code: 'invalid_grant' });
    const profile = await t.app.inject({ method: 'GET', url: `/v1/profile/${user.id}`, headers: { authorization: `Bearer ${mine.access_token}`, 'x-client-id': app.id } });
    expect(profile.statusCode).toBe(401);
    await expect(t.app.tokens.refresh({ family: await findRefreshFamily(t.db, hashSecret(theirs.refresh_token)), client: other }, {})).resolves.toBeTypeOf('string');
    const events = await t.db.selectFrom('events').selectAll().where('type', '=', 'app.user_blocked').where('app_id', '=', app.id).execute();
    expect(events).toHaveLength(1);
    expect(events[0]!.user_id).toBe(user.id);
  });

  it('a blocked user cannot sign in to the app via REST login (403 user_blocked, after a correct password)', async () => {
    const dev = await makeDeveloper(t.db);
    const app = await makeApp(t.db, { developerId: dev.id });
    const { makeUser } = await import('../helpers/factories.js');
    const user = await makeUser(t.app);
    await addMember(t, app, user);
    await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}/users/${user.id}`, headers: { authorization: `Bearer ${dev.apiKey}` }, payload: { status: 'blocked' } });
    const login = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: user.password, client_id: app.id } });
    expect(login.statusCode).toBe(403);
    expect(login.json().code).toBe('user_blocked');
  });

  it('unknown user of the app → 404; bad body → 400; another developer → 404', async () => {
    const dev = await makeDeveloper(t.db);
    const app = await makeApp(t.db, { developerId: dev.id });
    const stranger = await quickUser(t);
    const patch = (userId: string, payload: unknown, key = dev.apiKey) =>
      t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${app.id}/users/${userId}`, headers: { authorization: `Bearer ${key}` }, payload: payload as object });
    expect((await patch(stranger.id, { status: 'blocked' })).statusCode).toBe(404);
    await addMember(t, app, stranger);
    expect((await patch(stranger.id, { status: 'disabled' })).statusCode).toBe(400);
    expect((await patch(stranger.id, { status: 'blocked', extra: 1 })).statusCode).toBe(400);
    const other = await makeDeveloper(t.db);
    expect((await patch(stranger.id, { status: 'blocked' }, other.apiKey)).statusCode).toBe(404);
  });
});
