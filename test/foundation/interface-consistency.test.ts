import { connect, type AddressInfo } from 'node:net';
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
  it('a path segment over the length limit → 414 uri_too_long in the catalogue shape; a malformed escape → 400', async () => {
    const developer = bearer((await createDeveloperViaApi(t)).apiKey);
    const long = await t.app.inject({ url: `/v1/dev/apps/${'a'.repeat(201)}`, headers: developer });
    expect(long.statusCode).toBe(414);
    expect(long.headers['content-type']).toMatch(/^application\/json/);
    expect(long.json()).toEqual({ code: 'uri_too_long', message: 'A path segment of the request is too long.' });
    const malformed = await t.app.inject({ url: '/v1/dev/apps/%E0%A4%A', headers: developer });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().code).toBe('invalid_request');
  });

  it('headers over the size limit → 431 headers_too_large in the catalogue shape, not Node\'s own body', async () => {
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const { port } = t.app.server.address() as AddressInfo;
    const answer = await new Promise<string>((resolve, reject) => {
      const socket = connect(port, '127.0.0.1', () => socket.write(`GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`));
      let text = '';
      socket.on('data', (chunk) => (text += chunk));
      socket.on('close', () => resolve(text));
      socket.on('error', reject);
    });
    const [head, body] = answer.split('\r\n\r\n');
    expect(head).toMatch(/^HTTP\/1\.1 431 /);
    expect(head).toMatch(/content-type: application\/json/i);
    expect(JSON.parse(body!)).toEqual({ code: 'headers_too_large', message: 'The request headers are too large.' });
  });
});
