import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeApp, makeUser } from '../helpers/factories.js';

/** The same mistake gets the same answer on every route (issue 14). */
describe('one answer per mistake', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it.each([
    ['DELETE', '/oauth/token', 'OPTIONS, POST'],
    ['PUT', '/v1/auth/login', 'OPTIONS, POST'],
    ['POST', '/healthz', 'GET, HEAD'],
    ['DELETE', '/login', 'GET, HEAD, POST'],
    ['PUT', '/v1/dev/apps/app_anything', 'DELETE, GET, HEAD, PATCH'],
  ])('%s on %s, a path with other methods → 405 with Allow and the JSON error body', async (method, url, allow) => {
    const res = await t.app.inject({ method: method as 'GET', url });
    expect(res.statusCode).toBe(405);
    expect(res.headers.allow).toBe(allow);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.json()).toEqual({ code: 'method_not_allowed', message: 'Method not allowed.' });
  });

  it('an unknown path stays 404, also below a CORS preflight wildcard', async () => {
    for (const url of ['/v1/nothing', '/v1/auth/nothing']) {
      const res = await t.app.inject({ method: 'DELETE', url });
      expect(res.statusCode, url).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
  });

  it('every listing refuses unknown query parameters with 400 invalid_request', async () => {
    const developer = bearer((await createDeveloperViaApi(t)).apiKey);
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    const app = (await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: developer, payload: { name: 'A', redirect_uris: ['https://a.example/cb'], type: 'public' } })).json();
    const listings = [
      ['/v1/admin/users', admin],
      ['/v1/admin/developers', admin],
      ['/v1/dev/apps', developer],
      [`/v1/dev/apps/${app.id}/users`, developer],
      [`/v1/dev/apps/${app.id}/events`, developer],
      [`/v1/dev/apps/${app.id}/legal/views`, developer],
    ] as const;
    for (const [url, headers] of listings) {
      const res = await t.app.inject({ url: `${url}?bogus=1`, headers });
      expect(res.statusCode, url).toBe(400);
      expect(res.json(), url).toMatchObject({ code: 'invalid_request', details: [{ path: 'querystring', message: expect.stringContaining('bogus') }] });
      expect((await t.app.inject({ url, headers })).statusCode, url).toBe(200);
    }
  });

  it('admin user listing: page and pageSize are plain integers in range', async () => {
    const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    for (const query of ['page=0', 'page=1e3', 'pageSize=101', 'pageSize=0x10', 'page=']) {
      expect((await t.app.inject({ url: `/v1/admin/users?${query}`, headers: admin })).statusCode, query).toBe(400);
    }
    expect((await t.app.inject({ url: '/v1/admin/users?page=2&pageSize=100', headers: admin })).json()).toMatchObject({ page: 2, pageSize: 100 });
  });

  it('__proto__ and constructor keys in a JSON body get the same code, whatever the depth', async () => {
    const client = await makeApp(t.db);
    const user = await makeUser(t.app);
    const tokens = (await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: user.password, client_id: client.id } })).json();
    const headers = { authorization: `Bearer ${tokens.access_token}`, 'x-client-id': client.id, 'content-type': 'application/json' };
    const bodies = ['{"data":{"__proto__":{}}}', '{"data":{"constructor":{}}}', '{"data":{"constructor":{"prototype":{}}}}', '{"__proto__":{"data":{}}}'];
    for (const payload of bodies) {
      const res = await t.app.inject({ method: 'PUT', url: `/v1/profile/${user.id}`, headers, payload });
      expect(res.statusCode, payload).toBe(400);
      expect(res.json().code, payload).toBe('invalid_request');
    }
  });

  it('/oauth/idp/start with an unknown client answers as /oauth/authorize does: an HTML 400 page, no redirect', async () => {
    const query = 'client_id=app_unknown&redirect_uri=https%3A%2F%2Fa.example%2Fcb&state=s';
    for (const path of ['/oauth/idp/start', '/oauth/authorize']) {
      const res = await t.app.inject(`${path}?${query}&response_type=code`);
      expect(res.statusCode, path).toBe(400);
      expect(res.headers['content-type'], path).toMatch(/^text\/html/);
      expect(res.headers.location, path).toBeUndefined();
    }
  });
});
