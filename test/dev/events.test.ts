import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';
import { addMember, quickUser, tokensFor } from '../helpers/members.js';

describe('developer events GET /v1/dev/apps/{id}/events', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('lists the app’s events in order with cursor paging and a type filter; never another app’s', async () => {
    const dev = await makeDeveloper(t.db);
    const app = await makeApp(t.db, { developerId: dev.id });
    const other = await makeApp(t.db);
    const user = await quickUser(t);
    await addMember(t, app, user);
    await addMember(t, other, user);
    const at = (await tokensFor(t, app, user)).access_token;
    const atOther = (await tokensFor(t, other, user)).access_token;
    const put = (token: string, clientId: string, n: number) =>
      t.app.inject({ method: 'PUT', url: `/v1/profile/${user.id}`, headers: { authorization: `Bearer ${token}`, 'x-client-id': clientId }, payload: { data: { n } } });
    for (let i = 1; i <= 5; i++) expect((await put(at, app.id, i)).statusCode).toBe(200);
    await put(atOther, other.id, 1);
    await t.app.inject({ method: 'DELETE', url: `/v1/profile/${user.id}`, headers: { authorization: `Bearer ${at}`, 'x-client-id': app.id } });

    const get = (query: string, key = dev.apiKey, appId = app.id) =>
      t.app.inject({ method: 'GET', url: `/v1/dev/apps/${appId}/events${query}`, headers: { authorization: `Bearer ${key}` } });
    const first = (await get('?limit=2')).json();
    expect(first.items.map((e: { type: string }) => e.type)).toEqual(['profile.updated', 'profile.updated']);
    expect(first.items[0].data).toEqual({ version: 1 });
    expect(first.items[0].app_id).toBe(app.id);
    expect(first.items[0].at).toMatch(/^\d{4}-\d{2}-\d{2}T/);
    expect(first.next_cursor).toBe(first.items[1].id);
    const seen = [...first.items];
    let cursor = first.next_cursor;
    while (cursor) {
      const page = (await get(`?limit=2&after=${cursor}`)).json();
      seen.push(...page.items);
      cursor = page.next_cursor;
    }
    expect(seen.map((e) => e.type)).toEqual([...Array(5).fill('profile.updated'), 'profile.deleted']);
    const ids = seen.map((e) => e.id);
    expect([...ids].sort()).toEqual(ids);
    expect(seen.every((e) => e.app_id === app.id)).toBe(true);

    const deleted = (await get('?type=profile.deleted')).json();
    expect(deleted.items).toHaveLength(1);
    expect(deleted.next_cursor).toBeNull();

    for (const bad of ['?limit=0', '?limit=101', '?limit=x', '?after=garbage', "?after=evt_' OR 1=1", '?type=A B']) {
      expect((await get(bad)).statusCode, bad).toBe(400);
    }
    expect((await get('', dev.apiKey, other.id)).statusCode).toBe(404);
  });
});
