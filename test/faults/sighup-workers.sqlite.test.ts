import { readFileSync } from 'node:fs';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT } from '../helpers/app.js';
import { commandLineOf, freshDatabaseUrl } from '../helpers/processes.js';
import { type AckedUser, call, isAlive, launch, pause, provision, report, type Server, until, verifyAcknowledged } from './harness.js';

// WORKERS=2 and SIGHUP to the primary (src/cluster.ts, docs/operations/deploy.md "Restarts without
// dropped requests"): eight clients sign in, rotate refresh tokens and read their profile with the
// bearer token while the workers are replaced one at a time: not one request fails, every
// acknowledged rotation is the one that works afterwards, and the primary is the same process. On
// SQLite only: the cluster code is the same on PostgreSQL, and the suite has a time budget.

const LANES = 8;
const DRAIN_SECONDS = '1';

type Kind = 'login' | 'refresh' | 'profile';

/** The primary's worker processes: its node children (the kernel's list; tsx may add an esbuild child). */
const workersOf = (primary: number): number[] =>
  readFileSync(`/proc/${primary}/task/${primary}/children`, 'utf8')
    .split(' ')
    .filter(Boolean)
    .map(Number)
    .filter((pid) => {
      try {
        return commandLineOf(pid)[0] === process.execPath;
      } catch {
        return false; // gone meanwhile
      }
    });

const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

describe(`WORKERS=2: SIGHUP replaces the workers under load (${TEST_DIALECT})`, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>> | undefined;
  let server: Server | undefined;
  const workerPids = new Set<number>();

  afterAll(async () => {
    if (server && isAlive(server)) server.child.kill('SIGKILL');
    await server?.done;
    for (const pid of workerPids) if (alive(pid)) process.kill(pid, 'SIGKILL');
    await database?.drop();
  });

  it('zero failed requests and no acknowledged rotation lost, same primary', { timeout: 180_000 }, async () => {
    database = await freshDatabaseUrl();
    // The fault is the restart, not overload: password checks may queue while one worker starts.
    server = await launch(database, { WORKERS: '2', SHUTDOWN_DRAIN_SECONDS: DRAIN_SECONDS, PASSWORD_MAX_WAIT_MS: '60000' });
    const base = server.url;
    const primary = server.child.pid!;
    await until(async () => workersOf(primary).length === 2, 20_000, 100);
    const original = workersOf(primary);
    original.forEach((pid) => workerPids.add(pid));

    const { clientId } = await provision(base);
    const users: AckedUser[] = [];
    for (let lane = 0; lane < LANES; lane++) {
      const email = `sighup-${lane}@example.com`;
      const password = `sighup restart passphrase ${lane}`;
      const res = await call(`${base}/v1/auth/register`, { method: 'POST', json: { email, password, client_id: clientId } });
      if (res.status !== 201) throw new Error(`register: ${res.status} ${JSON.stringify(res.body)}`);
      const user: AckedUser = { email, password, userId: res.body.user.id, accessToken: res.body.access_token, refreshToken: res.body.refresh_token, profileVersion: 0, profileData: null };
      const profileData = { lane };
      const put = await call(`${base}/v1/profile/${user.userId}`, { method: 'PUT', headers: { authorization: `Bearer ${user.accessToken}`, 'x-client-id': clientId }, json: { data: profileData } });
      if (put.status !== 200) throw new Error(`profile: ${put.status} ${JSON.stringify(put.body)}`);
      users.push({ ...user, profileVersion: put.body.version, profileData });
    }

    let requests = 0;
    const failures: string[] = [];
    const counts: Record<string, number> = {};
    let running = true;
    const record = (kind: Kind, res: Awaited<ReturnType<typeof call>>) => {
      requests += 1;
      const key = `${kind}:${res.status}`;
      counts[key] = (counts[key] ?? 0) + 1;
      if (res.status !== 200) failures.push(`${key} ${JSON.stringify(res.body).slice(0, 160)}`);
      return res;
    };
    const lane = async (user: AckedUser) => {
      let step = 0;
      while (running) {
        step += 1;
        const kind = (['refresh', 'profile', 'profile', 'refresh', 'profile', 'login'] as const)[step % 6]!;
        if (kind === 'refresh') {
          const res = record(kind, await call(`${base}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: user.refreshToken, client_id: clientId } }));
          if (res.status === 200) {
            user.refreshToken = res.body.refresh_token;
            user.accessToken = res.body.access_token;
          }
        } else if (kind === 'profile') {
          record(kind, await call(`${base}/v1/profile/${user.userId}`, { headers: { authorization: `Bearer ${user.accessToken}`, 'x-client-id': clientId } }));
        } else {
          const res = record(kind, await call(`${base}/v1/auth/login`, { method: 'POST', json: { email: user.email, password: user.password, client_id: clientId } }));
          if (res.status === 200) {
            // A login issues a new refresh token; the one held before stays valid too.
            user.refreshToken = res.body.refresh_token;
            user.accessToken = res.body.access_token;
          }
        }
      }
    };
    const lanes = users.map((user) => lane(user));
    await pause(1500);
    const beforeRestart = requests;

    const signalled = performance.now();
    server.child.kill('SIGHUP');
    // When each worker appeared and each original one exited, in ms after the signal.
    const timeline: string[] = [];
    const seen = new Set(original);
    const gone = new Set<number>();
    const roundMs = await until(async () => {
      const now = workersOf(primary);
      const at = Math.round(performance.now() - signalled);
      for (const pid of now) if (!seen.has(pid)) seen.add(pid) && timeline.push(`${at} ms: worker ${pid} forked`);
      for (const pid of original) if (!gone.has(pid) && !alive(pid)) gone.add(pid) && timeline.push(`${at} ms: worker ${pid} exited`);
      now.forEach((pid) => workerPids.add(pid));
      return now.length === 2 && now.every((pid) => !original.includes(pid)) && original.every((pid) => !alive(pid));
    }, 90_000, 50).catch((error: Error) => {
      throw new Error(`${error.message}; ${JSON.stringify({ timeline, original, now: workersOf(primary), failures: failures.slice(0, 5) })}\n${server!.output().stderr.slice(-2000)}`);
    });
    const duringRestart = requests - beforeRestart;
    // The new workers carry the load a moment before it stops.
    await pause(1000);
    running = false;
    await Promise.all(lanes);
    const replaced = workersOf(primary);

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
