import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Storage } from '../../src/storage/connect.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { startServersOnOneDatabase } from '../helpers/processes.js';

/**
 * docs/reference/tokens.md across processes (issue 13): two Gatehouse servers share one PostgreSQL database. An
 * access token that has just been read on the second process (so any per-process state about its
 * grant is warm there) is refused by that process at once after its grant is revoked on the first.
 * Whatever the bearer check caches, revocation must reach every process before the next request.
 */
describe('revocation across two server processes on one database', { timeout: 120_000 }, () => {
  let storage: Storage;
  let ports: number[] = [];
  let stop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    // One issuer for both, as behind a load balancer: a token of one is a token of the other.
    const started = await startServersOnOneDatabase(2, { IP_AUTH_PER_MINUTE: '100000', BASE_URL: 'http://localhost:3000' });
    ({ storage, stop } = started);
    ports = started.servers.map((s) => s.port);
  });
  afterAll(async () => stop?.());

  const url = (server: number, path: string) => `http://127.0.0.1:${ports[server]!}${path}`;

  it('a revoked grant’s access token is refused at once on the other process, after being accepted there', async () => {
    const app = await makeApp(storage.db);
    const user = await makeUser({ db: storage.db });
    const login = await fetch(url(0, '/v1/auth/login'), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: user.email, password: user.password, client_id: app.id }),
    });
    expect(login.status).toBe(200);
    const { access_token: accessToken, refresh_token: refreshToken } = (await login.json()) as { access_token: string; refresh_token: string };
    const read = (server: number) => fetch(url(server, `/v1/profile/${user.id}`), { headers: { authorization: `Bearer ${accessToken}`, 'x-client-id': app.id } });

    // Accepted on the second process, several times (no profile yet: 404, but past the bearer check).
    for (let i = 0; i < 3; i++) expect((await read(1)).status).toBe(404);

    const revoked = await fetch(url(0, '/oauth/revoke'), {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ token: refreshToken, token_type_hint: 'refresh_token', client_id: app.id }).toString(),
    });
    expect(revoked.status).toBe(200);
    // The very next request on the other process, and on the first.
    expect((await read(1)).status).toBe(401);
    expect((await read(0)).status).toBe(401);
    expect((await fetch(url(1, '/oauth/userinfo'), { headers: { authorization: `Bearer ${accessToken}` } })).status).toBe(401);
  });
});
