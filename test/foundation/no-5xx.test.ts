import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';

/**
 * docs/security/checklist.md#input-robustness, docs/security/checklist.md#logging-and-errors: every registered route, fed malformed paths, queries, bodies and
 * credentials, answers below 500 with no stack trace, SQL or file path in the body.
 */

const PARAM_VALUES = ['x', 'a%00b', '..%2F..%2Fetc%2Fpasswd', "'%20OR%20'1'='1", '%00', 'a'.repeat(190)];
const QUERIES = ['', '?client_id=x&client_id=y', '?q=%25%5F&page=-1&pageSize=abc', `?state=${'s'.repeat(5000)}`, '?lang=../../x&from=2026-13-45'];
const BODIES: Array<{ type: string; payload: string }> = [
  { type: 'application/json', payload: '{' },
  { type: 'application/json', payload: 'null' },
  { type: 'application/json', payload: '[]' },
  { type: 'application/json', payload: '"str"' },
  { type: 'application/json', payload: '{"email":123,"password":true,"data":[],"client_id":{"$ne":1},"status":"x"}' },
  { type: 'application/json', payload: `{"a":${'['.repeat(5000)}${']'.repeat(5000)}}` },
  { type: 'application/json', payload: '\uFEFF{"email":"a@b.c"}' },
  { type: 'application/json', payload: '{"email":"n\\u0000@example.com","password":"long enough \\u0000 pass","name":"a\\u0000b","client_id":"x\\u0000"}' },
  { type: 'application/x-www-form-urlencoded', payload: 'grant_type=authorization_code&code=x&code=y&csrf=z' },
  { type: 'text/plain', payload: 'hello' },
];
/** What an error body must never contain: stack frames, driver messages, file paths. */
const LEAK = /\bat \w+ \(|node_modules|SQLITE|syntax error at|\/work\/|\.ts:\d+/;
const AUTH = [undefined, 'Bearer x.y.z', 'Bearer eyJhbGciOiJub25lIn0.e30.', 'Basic Og==', 'Bearer '.padEnd(3000, 'A')];

describe('no route answers 5xx to malformed input', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000000' } });
  });
  afterAll(async () => t.close());

  it('sweeps every registered route', async () => {
    const routes = t.app.routeList.filter((r) => r.method !== 'HEAD' && r.method !== 'OPTIONS');
    expect(routes.length).toBeGreaterThan(40);
    const failures: string[] = [];
    let i = 0;
    for (const route of routes) {
      for (const value of PARAM_VALUES) {
        const path = route.url.replace(/:(\w+)/g, value).replace(/\*$/, value);
        for (const query of QUERIES) {
          const body = route.method === 'GET' || route.method === 'DELETE' ? undefined : BODIES[i % BODIES.length]!;
          const authorization = AUTH[i % AUTH.length];
          i++;
          const res = await t.app.inject({
            method: route.method as 'GET',
            url: `${path}${query}`,
            headers: { ...(authorization ? { authorization } : {}), ...(body ? { 'content-type': body.type } : {}), 'x-client-id': value },
            ...(body ? { payload: body.payload } : {}),
          });
          if (res.statusCode >= 500 || (res.statusCode >= 400 && LEAK.test(res.body))) {
            failures.push(`${route.method} ${path}${query.slice(0, 40)} → ${res.statusCode} ${res.body.slice(0, 120)}`);
          }
        }
      }
    }
    expect(failures).toEqual([]);
  }, 120_000);

  it('a NUL byte in sign-in fields is refused as bad input on every database, never a 500', async () => {
    const client = await makeApp(t.db);
    const post = (url: string, payload: object) => t.app.inject({ method: 'POST', url, payload });
    for (const [url, payload] of [
      ['/v1/auth/register', { email: 'nul-name@example.com', password: 'a long enough passphrase', name: 'a\u0000b', client_id: client.id }],
      ['/v1/auth/register', { email: 'nul\u0000@example.com', password: 'a long enough passphrase', client_id: client.id }],
      ['/v1/auth/login', { email: 'x\u0000@example.com', password: 'a long enough passphrase', client_id: client.id }],
      ['/v1/auth/magic-link/request', { email: 'x\u0000@example.com', client_id: client.id }],
    ] as const) {
      const res = await post(url, payload);
      expect(res.statusCode, `${url} ${JSON.stringify(payload)}`).toBeLessThan(500);
      expect(res.statusCode).not.toBe(201);
    }
  });
});
