import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Storage } from '../../src/storage/connect.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { startServersOnOneDatabase } from '../helpers/processes.js';

/**
 * A sign-out from the sessions list reaches every process (docs/account/sessions.md), as the other
 * revocations do (test/tokens/revocation-processes.pg.test.ts): two servers on one PostgreSQL
 * database; a grant signed out with `DELETE /v1/auth/sessions/{id}` on the first has its access token
 * refused by the second at once, after the second had just accepted it.
 */
describe('signing out of a session across two server processes', { timeout: 120_000 }, () => {
  let storage: Storage;
  let ports: number[] = [];
  let stop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const started = await startServersOnOneDatabase(2, { IP_AUTH_PER_MINUTE: '100000', BASE_URL: 'http://localhost:3000' });
    ({ storage, stop } = started);
    ports = started.servers.map((s) => s.port);
  });
  afterAll(async () => stop?.());

  const url = (server: number, path: string) => `http://127.0.0.1:${ports[server]!}${path}`;

  it("a grant signed out on one process is refused on the other at once", async () => {
    const app = await makeApp(storage.db);
    const user = await makeUser({ db: storage.db });
    const login = async () => {
      const res = await fetch(url(0, '/v1/auth/login'), {
        method: 'POST',
        headers: { 'content-type': 'application/json', 'user-agent': 'Mozilla/5.0 (X11; Linux x86_64; rv:121.0) Gecko/20100101 Firefox/121.0' },
        body: JSON.stringify({ email: user.email, password: user.password, client_id: app.id }),
      });
      expect(res.status).toBe(200);
      return ((await res.json()) as { access_token: string }).access_token;
    };
    const keep = await login();
    const gone = await login();
    const read = (server: number, token: string) => fetch(url(server, '/oauth/userinfo'), { headers: { authorization: `Bearer ${token}` } });
    for (let i = 0; i < 3; i++) expect((await read(1, gone)).status).toBe(200);

    const listed = (await (await fetch(url(0, '/v1/auth/sessions'), { headers: { authorization: `Bearer ${gone}` } })).json()) as { sessions: Array<{ id: string; current: boolean; browser: string | null }> };
    expect(listed.sessions).toHaveLength(2);
    expect(listed.sessions.every((s) => s.browser === 'Firefox')).toBe(true);
    const target = listed.sessions.find((s) => s.current)!;
    const removed = await fetch(url(0, `/v1/auth/sessions/${target.id}`), { method: 'DELETE', headers: { authorization: `Bearer ${keep}` } });
    expect(removed.status).toBe(204);

    expect((await read(1, gone)).status).toBe(401);
    expect((await read(0, gone)).status).toBe(401);
    expect((await read(1, keep)).status).toBe(200);
  });
});
