import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT } from '../helpers/app.js';
import { freshDatabaseUrl, isProcessAlive, nodeChildrenOf } from '../helpers/processes.js';
import { call, enrolUsers, isAlive, launch, pause, provision, report, type Server, SteadyLoad, until, verifyAcknowledged } from './harness.js';

// WORKERS=2 and SIGHUP to the primary (src/cluster.ts, docs/operations/deploy.md "Restarts without
// dropped requests"): eight clients sign in, rotate refresh tokens and read their profile with the
// bearer token while the workers are replaced one at a time: not one request fails, every
// acknowledged rotation is the one that works afterwards, and the primary is the same process. On
// SQLite only: the cluster code is the same on PostgreSQL, and the suite has a time budget.

const LANES = 8;
const DRAIN_SECONDS = '1';

describe(`WORKERS=2: SIGHUP replaces the workers under load (${TEST_DIALECT})`, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>> | undefined;
  let server: Server | undefined;
  const workerPids = new Set<number>();

  afterAll(async () => {
    if (server && isAlive(server)) server.child.kill('SIGKILL');
    await server?.done;
    for (const pid of workerPids) if (isProcessAlive(pid)) process.kill(pid, 'SIGKILL');
    await database?.drop();
  });

  it('zero failed requests and no acknowledged rotation lost, same primary', { timeout: 180_000 }, async () => {
    database = await freshDatabaseUrl();
    // The fault is the restart, not overload: password checks may queue while one worker starts.
    server = await launch(database, { WORKERS: '2', SHUTDOWN_DRAIN_SECONDS: DRAIN_SECONDS, PASSWORD_MAX_WAIT_MS: '60000' });
    const base = server.url;
    const primary = server.child.pid!;
    await until(async () => nodeChildrenOf(primary).length === 2, 20_000, 100);
    const original = nodeChildrenOf(primary);
    original.forEach((pid) => workerPids.add(pid));

    const { clientId } = await provision(base);
    const users = await enrolUsers(base, clientId, LANES, 'sighup');
    const load = new SteadyLoad({ base, clientId }, users, ['refresh', 'profile', 'profile', 'refresh', 'profile', 'login']);
    await pause(1500);
    const beforeRestart = load.requests;

    const signalled = performance.now();
    server.child.kill('SIGHUP');
    // When each worker appeared and each original one exited, in ms after the signal.
    const timeline: string[] = [];
    const seen = new Set(original);
    const gone = new Set<number>();
    const roundMs = await until(async () => {
      const now = nodeChildrenOf(primary);
      const at = Math.round(performance.now() - signalled);
      for (const pid of now) if (!seen.has(pid)) seen.add(pid) && timeline.push(`${at} ms: worker ${pid} forked`);
      for (const pid of original) if (!gone.has(pid) && !isProcessAlive(pid)) gone.add(pid) && timeline.push(`${at} ms: worker ${pid} exited`);
      now.forEach((pid) => workerPids.add(pid));
      return now.length === 2 && now.every((pid) => !original.includes(pid)) && original.every((pid) => !isProcessAlive(pid));
    }, 90_000, 50).catch((error: Error) => {
      throw new Error(`${error.message}; ${JSON.stringify({ timeline, original, now: nodeChildrenOf(primary), failures: load.failures.slice(0, 5) })}\n${server!.output().stderr.slice(-2000)}`);
    });
    const duringRestart = load.requests - beforeRestart;
    // The new workers carry the load a moment before it stops.
    await pause(1000);
    await load.stop();
    const { requests, failures, counts } = load;
    const replaced = nodeChildrenOf(primary);

    const verified = await verifyAcknowledged(base, clientId, users);
    report(`SIGHUP worker restart (${TEST_DIALECT})`, {
      requests,
      duringRestart,
      failures: failures.length,
      lost: verified.lost.length,
      roundMs: Math.round(roundMs),
      sinceSignalMs: Math.round(performance.now() - signalled),
      drainSeconds: Number(DRAIN_SECONDS),
      timeline,
      workers: { before: original, after: replaced },
      counts,
    });
    if (failures.length) console.log(`[faults] sighup failures: ${failures.slice(0, 10).join(' | ')}\n${server.output().stderr.slice(-2000)}`);

    expect(isAlive(server)).toBe(true);
    expect(server.child.pid).toBe(primary);
    expect(replaced).toHaveLength(2);
    expect(duringRestart).toBeGreaterThan(20);
    for (const kind of ['login', 'refresh', 'profile']) expect(counts[`${kind}:200`] ?? 0).toBeGreaterThan(0);
    expect(failures.slice(0, 10)).toEqual([]);
    expect(verified.lost).toEqual([]);
    expect((await call(`${base}/readyz`)).status).toBe(200);
  });
});
