import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT } from '../helpers/app.js';
import { freshDatabaseUrl } from '../helpers/processes.js';
import { isAlive, launch, MixedLoad, pause, provision, report, type Server, verifyAcknowledged } from './harness.js';

// kill -9 of the server under a mixed write load (registrations, profile writes, refresh rotations):
// after a restart on the same database, every write the service acknowledged is there.
describe(`kill -9 under load (${TEST_DIALECT})`, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  const servers: Server[] = [];

  afterAll(async () => {
    for (const server of servers) if (isAlive(server)) server.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.done));
    await database?.drop();
  });

  it('loses no acknowledged write', async () => {
    database = await freshDatabaseUrl();
    const first = await launch(database);
    servers.push(first);
    const { clientId } = await provision(first.url);

    const load = new MixedLoad(first.url, clientId, `kill-${TEST_DIALECT}`);
    load.start();
    await pause(3000);
    first.child.kill('SIGKILL');
    await first.done;
    await load.stop();

    const started = performance.now();
    const second = await launch(database);
    servers.push(second);
    const restartMs = Math.round(performance.now() - started);
    const verified = await verifyAcknowledged(second.url, clientId, load.users);
    report(`kill -9 (${TEST_DIALECT})`, { requests: load.requests, acknowledged: load.acknowledged, users: verified.users, lost: verified.lost.length, statuses: load.statuses, restartMs });

    expect(load.users.length).toBeGreaterThan(5);
    expect(load.acknowledged).toBeGreaterThan(30);
    expect(verified.lost).toEqual([]);
  });
});
