import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { buildTestApp, createTestStorage, testConfig, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';

/** docs/reference/errors.md: bad input never gets a 500 or an HTML/stack body; the shapes and codes are fixed. */
describe('malformed input on a JSON route', () => {
  let t: TestApp;
  let headers: Record<string, string>;
  beforeAll(async () => {
    t = await buildTestApp();
    headers = bearer((await createDeveloperViaApi(t)).apiKey);
  });
  afterAll(async () => t.close());

  const post = (payload: string, contentType = 'application/json') =>
    t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: { ...headers, 'content-type': contentType }, payload });

  const expectCleanError = (res: { statusCode: number; headers: Record<string, unknown>; body: string }, status: number, code: string) => {
    expect(res.statusCode).toBe(status);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    const body = JSON.parse(res.body);
    expect(body).toMatchObject({ code, message: expect.any(String) });
    expect(res.body).not.toMatch(/\bat .+\.(ts|js):\d+|node_modules|SyntaxError|FST_/);
  };

  it.each(['{', '{"name":}', '{"name": "x",}', "{'name': 'x'}", '\u00ef\u00bb\u00bf{"a":1'])('unparseable JSON %j → 400 invalid_json', async (payload) => {
    expectCleanError(await post(payload), 400, 'invalid_json');
  });

  it('an empty JSON body → 400 invalid_json', async () => {
    expectCleanError(await post(''), 400, 'invalid_json');
  });

  it.each(['text/plain', 'application/x-www-form-urlencoded', 'multipart/form-data; boundary=x', 'application/xml', 'application/json; charset=utf-16'])(
    'Content-Type %s → 415 unsupported_media_type',
    async (type) => {
      expectCleanError(await post(JSON.stringify(appBody()), type), 415, 'unsupported_media_type');
    },
  );

  it('a body over 64 KiB → 413 payload_too_large', async () => {
    const payload = JSON.stringify(appBody({ name: 'x'.repeat(64 * 1024) }));
    expectCleanError(await post(payload), 413, 'payload_too_large');
  });

  it('a schema failure → 400 invalid_request with details [{path, message}]', async () => {
    const res = await post(JSON.stringify({ name: 42, redirect_uris: ['https://a.example/cb'], type: 'public' }));
    expectCleanError(res, 400, 'invalid_request');
    expect(res.json().details).toEqual([{ path: 'body.name', message: expect.any(String) }]);
  });

  it.each(['null', '[]', '"str"', '42', 'true'])('a JSON %s instead of an object → 400 invalid_request', async (payload) => {
    expectCleanError(await post(payload), 400, 'invalid_request');
  });

  it.each(['{"__proto__":{"isAdmin":true}}', '{"constructor":{"prototype":{"x":1}}}'])('prototype poisoning %s → 400 invalid_request', async (payload) => {
    expectCleanError(await post(payload), 400, 'invalid_request');
    expect(({} as Record<string, unknown>).isAdmin).toBeUndefined();
  });

  it('an unknown route → 404 not_found as JSON', async () => {
    const res = await t.app.inject('/v1/nothing-here');
    expectCleanError(res, 404, 'not_found');
  });
});

describe('unexpected exceptions', () => {
  it('→ 500 internal_error with a generic body; the details are only logged', async () => {
    const { storage, drop } = await createTestStorage();
    const logs: string[] = [];
    const app = await buildApp(testConfig(), { storage, logStream: { write: (line) => void logs.push(line) } });
    app.get('/test-only/boom', async () => {
      throw new Error('secret internal detail: /srv/gatehouse/db.ts:42 SELECT * FROM users');
    });
    await app.ready();
    try {
      const res = await app.inject('/test-only/boom');
      expect(res.statusCode).toBe(500);
      expect(res.json()).toEqual({ code: 'internal_error', message: 'Internal server error.' });
      expect(res.body).not.toContain('secret internal detail');
      expect(logs.join('\n')).toContain('secret internal detail');
      // The process keeps serving.
      expect((await app.inject('/healthz')).statusCode).toBe(200);
    } finally {
      await app.close();
      await storage.close();
      await drop();
    }
  });
});
