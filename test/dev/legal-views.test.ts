import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp, makeDeveloper } from '../helpers/factories.js';

describe('developer legal view counts GET /v1/dev/apps/{id}/legal/views', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('counts per day, filters by range, validates dates, hides other developers’ apps', async () => {
    const dev = await makeDeveloper(t.db);
    const app = await makeApp(t.db, { developerId: dev.id });
    const auth = { authorization: `Bearer ${dev.apiKey}` };
    const put = await t.app.inject({ method: 'PUT', url: `/v1/dev/apps/${app.id}/legal/terms?lang=en`, headers: auth, payload: { title: 'T', content: 'c' } });
    expect(put.statusCode).toBe(201);
    const view = () => t.app.inject({ method: 'POST', url: `/v1/legal/apps/${app.id}/view`, payload: { docType: 'terms' } });
    const day1 = new Date(t.clock.now() * 1000).toISOString().slice(0, 10);
    await view();
    await view();
    t.clock.advance(86_400);
    const day2 = new Date(t.clock.now() * 1000).toISOString().slice(0, 10);
    await view();
    // Concurrent views all count (atomic upsert).
    await Promise.all(Array.from({ length: 10 }, view));

    const get = (query: string, headers = auth, appId = app.id) => t.app.inject({ method: 'GET', url: `/v1/dev/apps/${appId}/legal/views${query}`, headers });
    const all = (await get(`?from=${day1}&to=${day2}`)).json();
    expect(all.items).toEqual([
      { docType: 'terms', lang: 'en', version: 1, day: day1, count: 2 },
      { docType: 'terms', lang: 'en', version: 1, day: day2, count: 11 },
    ]);
    expect((await get(`?from=${day2}&to=${day2}`)).json().items).toHaveLength(1);
    expect((await get('')).json().items).toHaveLength(2); // default: the last 30 days
    for (const bad of ['?from=2026-02-30', '?from=yesterday', `?from=${day2}&to=${day1}`, '?from=2020-01-01&to=2026-01-01', '?x=1']) {
      expect((await get(bad)).statusCode, bad).toBe(400);
    }
    const other = await makeDeveloper(t.db);
    expect((await get('', { authorization: `Bearer ${other.apiKey}` })).statusCode).toBe(404);
  });
});
