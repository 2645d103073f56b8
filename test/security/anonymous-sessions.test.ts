import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { authorizeUrl, Browser, makeClient, type TestClient } from '../helpers/oauth-flows.js';

/**
 * Anonymous requests do not grow storage (SECURITY issue item 6): a GET stores nothing until there is
 * something to remember, and what an authorization request leaves behind holds only the parameters
 * Gatehouse reads.
 */
describe('anonymous visitors and storage', () => {
  let t: TestApp;
  let client: TestClient;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000' } });
    client = await makeClient(t);
  });
  afterAll(async () => {
    await t?.close();
  });

  it('cookieless GETs of the sign-in pages write no session row, and their forms still work', async () => {
    const before = await countAll(t.db, 'browser_sessions');
    for (let i = 0; i < 40; i++) {
      for (const path of ['/login', '/register', '/magic-link/request', '/password/forgot', '/account']) {
        expect((await t.app.inject({ method: 'GET', url: path })).statusCode).toBe(200);
      }
    }
    expect(await countAll(t.db, 'browser_sessions')).toBe(before);
    // Positive control: the anonymous session's CSRF token is accepted, and sign-in writes one row.
    const b = new Browser(t.app);
    const { email } = await b.register();
    expect(await countAll(t.db, 'browser_sessions')).toBe(before + 1);
    const again = new Browser(t.app);
    expect((await again.login(email)).statusCode).toBe(303);
  });

  it('an authorization request remembers only the parameters Gatehouse reads', async () => {
    const before = await countAll(t.db, 'browser_sessions');
    const junk = Object.fromEntries(Array.from({ length: 60 }, (_, i) => [`junk_${i}`, 'x'.repeat(400)]));
    const { url } = authorizeUrl(client, { state: 'st-keep', extra: junk });
    const b = new Browser(t.app);
    const res = await b.get(url);
    expect(res.statusCode).toBe(302);
    expect(res.headers.location).toContain('/login');
    const rows = await t.db.selectFrom('browser_sessions').select('data').execute();
    expect(rows).toHaveLength(before + 1);
    const data = rows.map((r) => r.data).join('\n');
    expect(data).toContain('st-keep');
    expect(data).not.toContain('junk_');
    expect(Math.max(...rows.map((r) => r.data.length))).toBeLessThan(2000);
  });
});
