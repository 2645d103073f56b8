import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Storage } from '../../src/storage/connect.js';
import { makeApp, makeUser } from '../helpers/factories.js';
import { startServersOnOneDatabase } from '../helpers/processes.js';

/**
 * Issue "Security hardening", item 4, with real processes: two Gatehouse servers on one PostgreSQL
 * database share one budget of LOGIN_MAX_FAILURES evaluated passwords per address, whatever the
 * interleaving of 28 concurrent wrong passwords sent to both.
 */
describe('login attempts across two server processes on one database', { timeout: 120_000 }, () => {
  let storage: Storage;
  let ports: number[] = [];
  let stop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    const started = await startServersOnOneDatabase(2, { IP_AUTH_PER_MINUTE: '100000' });
    ({ storage, stop } = started);
    ports = started.servers.map((s) => s.port);
  });
  afterAll(async () => stop?.());

  const login = (port: number, body: Record<string, string>) =>
    fetch(`http://127.0.0.1:${port}/v1/auth/login`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });

  it('28 concurrent wrong passwords split over both processes: exactly 5 are evaluated, the rest 429', async () => {
    const app = await makeApp(storage.db);
    const user = await makeUser({ db: storage.db });
    const answers = await Promise.all(
      Array.from({ length: 28 }, (_, i) => login(ports[i % 2]!, { email: user.email, password: `wrong password ${i}`, client_id: app.id }).then((r) => r.status)),
    );
    const counts = answers.reduce<Record<number, number>>((acc, status) => ({ ...acc, [status]: (acc[status] ?? 0) + 1 }), {});
    expect(counts).toEqual({ 401: 5, 429: 23 });
    const failures = await storage.db.selectFrom('events').select('id').where('type', '=', 'user.login_failed').where('user_id', '=', user.id).execute();
    expect(failures).toHaveLength(5);
    // The address is locked now, on both processes, even for the right password.
    for (const port of ports) expect((await login(port, { email: user.email, password: user.password, client_id: app.id })).status).toBe(429);
  });

  it('positive control: another address signs in on either process', async () => {
    const app = await makeApp(storage.db);
    const user = await makeUser({ db: storage.db });
    for (const port of ports) expect((await login(port, { email: user.email, password: user.password, client_id: app.id })).status).toBe(200);
  });
});
