import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { freePort, freshDatabaseUrl, startServer } from '../helpers/processes.js';
import { call, enrolUsers, LOAD_ENV, pause, provision, report, SteadyLoad, until, verifyAcknowledged } from './harness.js';

// The reference deployment (deploy/haproxy.cfg, docs/operations/deploy.md): Debian's HAProxy in front of
// three instances on one PostgreSQL and one Redis. Twelve clients sign in, rotate refresh tokens, read
// their profile with the bearer token and open the hosted authorize page through the proxy while each
// instance in turn gets SIGTERM, exits, and is started again: not one request fails, and every refresh
// token whose rotation was acknowledged is the one that works afterwards.

const INSTANCES = 3;
const LANES = 12;
const DRAIN_SECONDS = '2.5';
const REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';


/** Debian's haproxy (`apt-get install -y haproxy`; .ci/run installs it). */
const haveHaproxy = spawnSync('haproxy', ['-v'], { stdio: 'ignore' }).status === 0;

describe.skipIf(!haveHaproxy)('a rolling restart behind HAProxy (PostgreSQL + Redis)', () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>> | undefined;
  const instances: Array<Awaited<ReturnType<typeof startServer>>> = [];
  let haproxy: ChildProcess | undefined;
  let haproxyLog = '';

  afterAll(async () => {
    for (const instance of instances) if (instance.child.exitCode === null && instance.child.signalCode === null) instance.child.kill('SIGKILL');
    await Promise.all(instances.map((i) => i.done));
    haproxy?.kill('SIGKILL');
    await database?.drop();
  });

  it('zero failed requests and no acknowledged rotation lost while each instance restarts', { timeout: 240_000 }, async () => {
    const began = performance.now();
    const progress = (what: string) => console.log(`[faults] haproxy: ${Math.round((performance.now() - began) / 100) / 10} s ${what} (${load?.requests ?? 0} requests, ${load?.failures.length ?? 0} failed)`);
    let load: SteadyLoad | undefined;
    database = await freshDatabaseUrl();
    const proxyPort = await freePort();
    const ports = await Promise.all(Array.from({ length: INSTANCES }, () => freePort()));
    const base = `http://127.0.0.1:${proxyPort}`;
    // One public address for all three: each accepts the tokens the others issued.
    // The fault here is the restarts, not overload: on a busy machine, two instances carrying the load
    // while the third starts may hold password checks past the default 5 s bound (503 by design).
    const env = { ...LOAD_ENV, BASE_URL: base, REDIS_URL, SHUTDOWN_DRAIN_SECONDS: DRAIN_SECONDS, PASSWORD_MAX_WAIT_MS: '60000' };
    const launchAt = (port: number) => startServer(database!, env, { port });
    // The first migrates; the others start once it has.
    instances[0] = await launchAt(ports[0]!);
    const rest = await Promise.all(ports.slice(1).map(launchAt));
    rest.forEach((instance, i) => (instances[i + 1] = instance));

    haproxy = spawn('haproxy', ['-db', '-f', 'deploy/haproxy.cfg'], {
      env: { PATH: process.env.PATH ?? '', HAPROXY_BIND: `127.0.0.1:${proxyPort}`, ...Object.fromEntries(ports.map((p, i) => [`GATEHOUSE_${i + 1}`, `127.0.0.1:${p}`])) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    haproxy.stdout!.on('data', (chunk) => (haproxyLog += chunk));
    haproxy.stderr!.on('data', (chunk) => (haproxyLog += chunk));
    await until(async () => (await call(`${base}/readyz`)).status === 200, 10_000, 100);
    // Every server up in HAProxy (rise 2 × inter 500 ms) before the load.
    await pause(1500);

    progress('instances and proxy up');
    const { clientId } = await provision(base);
    const users = await enrolUsers(base, clientId, LANES, 'haproxy');
    const verifier = randomBytes(32).toString('base64url');
    const challenge = createHash('sha256').update(verifier).digest('base64url');
    const authorizeUrl = `${base}/oauth/authorize?${new URLSearchParams({ response_type: 'code', client_id: clientId, redirect_uri: 'https://app.example/cb', scope: 'openid', state: 'rolling', code_challenge: challenge, code_challenge_method: 'S256' })}`;
    load = new SteadyLoad({ base, clientId, authorizeUrl }, users, ['refresh', 'profile', 'authorize', 'profile', 'refresh', 'login'], { authorize: [200, 302, 303] });
    await pause(2000);

    const exits: number[] = [];
    for (let i = 0; i < INSTANCES; i++) {
      progress(`SIGTERM to instance ${i + 1}`);
      if (i === 0 && load.failures.length) console.log(`[faults] haproxy: failures before any restart: ${load.failures.slice(0, 4).join(' | ')}`);
      const signalled = performance.now();
      instances[i]!.child.kill('SIGTERM');
      const finished = await instances[i]!.done;
      exits.push(Math.round(performance.now() - signalled));
      expect({ instance: i, code: finished.code, signal: finished.signal }).toEqual({ instance: i, code: 0, signal: null });
      progress(`instance ${i + 1} exited (${exits.at(-1)} ms)`);
      instances[i] = await launchAt(ports[i]!);
      progress(`instance ${i + 1} ready again`);
      // Back in HAProxy's rotation (rise 2 × inter 500 ms) before the next one leaves.
      await pause(1500);
    }
    await pause(1500);
    await load.stop();
    const { requests, failures, counts } = load;

    progress('load stopped');
    const verified = await verifyAcknowledged(base, clientId, users);
    report('haproxy rolling restart (postgres)', {
      requests,
      failures: failures.length,
      lost: verified.lost.length,
      longestExitMs: Math.max(...exits),
      exitsMs: exits,
      drainSeconds: Number(DRAIN_SECONDS),
      counts,
    });
    if (failures.length) console.log(haproxyLog.split('\n').filter((line) => / 5\d\d |<NOSRV>|SC--|--/.test(line)).slice(0, 20).join('\n'));

    expect(requests).toBeGreaterThan(200);
    for (const kind of ['login', 'refresh', 'profile', 'authorize']) expect(Object.keys(counts).some((key) => key.startsWith(`${kind}:`))).toBe(true);
    expect(failures.slice(0, 10)).toEqual([]);
    expect(verified.lost).toEqual([]);
    // The drain, then a few seconds at most: nothing holds the exit.
    expect(Math.max(...exits)).toBeLessThan(Number(DRAIN_SECONDS) * 1000 + 5000);
  });
});
