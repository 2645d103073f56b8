import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT } from '../helpers/app.js';
import { childrenOf, freshDatabaseUrl, isProcessAlive } from '../helpers/processes.js';
import { call, isAlive, launch, MixedLoad, pause, provision, report, type Server, until, verifyAcknowledged } from './harness.js';

// WORKERS=2 under a mixed write load: a worker killed with -9 is replaced and the other keeps serving;
// then the primary killed with -9 takes its workers down with it; after a restart every acknowledged
// write is there.
describe(`WORKERS=2: a worker, then the primary, killed under load (${TEST_DIALECT})`, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  const servers: Server[] = [];
  const orphans: number[] = [];

  afterAll(async () => {
    for (const pid of orphans) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
    for (const server of servers) if (isAlive(server)) server.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.done));
    await database?.drop();
  });

  it('keeps serving through a worker kill, and loses no acknowledged write', async () => {
    database = await freshDatabaseUrl();
    const cluster = await launch(database, { WORKERS: '2' });
    servers.push(cluster);
    const primary = cluster.child.pid!;
    await until(async () => childrenOf(primary).length === 2, 20_000, 100);
    const [victim, survivor] = childrenOf(primary) as [number, number];
    orphans.push(victim, survivor);
    const { clientId } = await provision(cluster.url);

    const load = new MixedLoad(cluster.url, clientId, `workers-${TEST_DIALECT}`);
    load.start();
    await pause(1500);

    process.kill(victim, 'SIGKILL');
    const afterWorkerKill = { ...load.statuses };
    const respawnMs = await until(async () => {
      const workers = childrenOf(primary);
      return workers.length === 2 && !workers.includes(victim);
    }, 20_000, 50);
    // The survivor answered meanwhile, and the replacement takes requests once up.
    for (const worker of childrenOf(primary)) orphans.push(worker);
    await pause(1500);
    const servedAfterWorkerKill = (load.statuses['200'] ?? 0) + (load.statuses['201'] ?? 0) - (afterWorkerKill['200'] ?? 0) - (afterWorkerKill['201'] ?? 0);
    expect((await call(`${cluster.url}/readyz`)).status).toBe(200);


    const networkErrorsAroundWorkerKill = (load.statuses.network ?? 0) - (afterWorkerKill.network ?? 0);

    const workers = childrenOf(primary);
    cluster.child.kill('SIGKILL');
    await cluster.done;
    await load.stop();
    const workersGoneMs = await until(async () => workers.every((pid) => !isProcessAlive(pid)), 10_000, 50);

    const restarted = await launch(database);
    servers.push(restarted);
    const verified = await verifyAcknowledged(restarted.url, clientId, load.users);
    report(`WORKERS=2 kills (${TEST_DIALECT})`, {
      requests: load.requests,
      acknowledged: load.acknowledged,
      lost: verified.lost.length,
      statuses: load.statuses,
      servedWhileReplacingWorker: servedAfterWorkerKill,
      networkErrorsAroundWorkerKill,
      respawnMs: Math.round(respawnMs),
      workersGoneAfterPrimaryKillMs: Math.round(workersGoneMs),
    });

    expect(servedAfterWorkerKill).toBeGreaterThan(0);
    expect(verified.lost).toEqual([]);
    expect(Object.keys(load.statuses).filter((s) => !/^2\d\d$|^503$|^network$/.test(s))).toEqual([]);
  });
});
