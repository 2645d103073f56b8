import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setupGatehouse, startGatehouse } from './http/gatehouse.js';
import type { LoadJob, LoadResult } from './http/load.js';
import { freePort, runLoadGenerator, startServer, type ServerProcess } from './http/proc.js';

/**
 * `npm run bench -- login-flood [--connections 128] [--timeout 1] [--duration 15] [--rounds 2]
 * [--max-wait-ms 0,5000,…]`: password
 * logins from more clients than the cores can answer in time, each giving up after `--timeout` seconds
 * (autocannon closes the connection and sends the login again on a new one), as impatient users and
 * retrying apps do when sign-in is overloaded. The production build on a fresh SQLite file and the bare
 * Fastify + argon2 `verify` reference (Gatehouse's implementation and parameters), each in turn. Reports the logins answered in time, and for
 * Gatehouse the argon2 computations run, skipped (its client had gone: it would answer nobody) and
 * refused as overdue (it had waited over PASSWORD_MAX_WAIT_MS: 503), from its metrics (METRICS_PORT). With
 * `--max-wait-ms`, each round runs Gatehouse once per bound listed (0: none), one after the other, so
 * the bounds are compared at the same hour. Prints a Markdown table; figures go into bench/RESULTS.md
 * by hand.
 */

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..');

const option = (args: string[], name: string, fallback: number) => {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
};

interface Hashing {
  total: number;
  skipped: number;
  overdue: number;
  running: number;
  waiting: number;
}

/** The argon2 queue, from the metrics Gatehouse serves on `metricsPort` (METRICS_PORT). */
async function hashing(metricsPort: number): Promise<Hashing> {
  const body = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
  const read = (name: string) => Number(new RegExp(`^gatehouse_password_hashing_${name} (\\d+)$`, 'm').exec(body)?.[1] ?? NaN);
  return { total: read('total'), skipped: read('skipped_total'), overdue: read('overdue_total'), running: read('running'), waiting: read('waiting') };
}

const drive = (job: Omit<LoadJob, 'resultFile'>, workDir: string, id: string): Promise<LoadResult> =>
  runLoadGenerator({ ...job, resultFile: join(workDir, `result-${id}.json`) });

const settle = (ms: number) => new Promise((done) => setTimeout(done, ms));

/** The answers other than 2xx, by status ("401: 3, 429: 1"), or 0. */
const others = (r: LoadResult) =>
  Object.entries(r.run.statusCodes)
    .filter(([code]) => !code.startsWith('2'))
    .map(([code, n]) => `${code}: ${n}`)
    .join(', ') || '0';

export async function main(args: string[]): Promise<void> {
  const connections = option(args, 'connections', 128);
  const timeout = option(args, 'timeout', 1);
  const duration = option(args, 'duration', 15);
  const rounds = option(args, 'rounds', 2);
  const boundsAt = args.indexOf('--max-wait-ms');
  // undefined: the server's default bound.
  const bounds: Array<string | undefined> = boundsAt >= 0 ? args[boundsAt + 1]!.split(',') : [undefined];
  const workDir = mkdtempSync(join(tmpdir(), 'gatehouse-login-flood-'));
  const servers: ServerProcess[] = [];
  const rows: string[] = [];
  const load = { connections, duration, warmup: 0, timeout, method: 'POST' as const, headers: { 'content-type': 'application/json' } };
  try {
    for (let round = 1; round <= rounds; round++) {
      for (const bound of bounds) {
        // Gatehouse: the REST login of the bench's users, in turn.
        const id = `${round}-${bound ?? 'default'}`;
        const dataDir = join(workDir, `data-${id}`);
        mkdirSync(dataDir);
        const port = await freePort();
        const metricsPort = await freePort();
        const env: Record<string, string> = { METRICS: '1', METRICS_PORT: String(metricsPort) };
        if (bound !== undefined) env.PASSWORD_MAX_WAIT_MS = bound;
        const gatehouse = await startGatehouse(
          { root: ROOT, databaseUrl: `sqlite:${join(dataDir, 'gatehouse.db')}`, dataDir },
          { port, logFile: join(workDir, `gatehouse-${id}.log`), name: `gatehouse-${id}`, env },
        );
        servers.push(gatehouse);
        // Few enough connections per address that no login meets LOGIN_MAX_FAILURES' slots all in flight.
        const setup = await setupGatehouse(gatehouse.url, Math.max(16, Math.ceil(connections / 2)));
        const before = await hashing(metricsPort);
        const ours = await drive(
          { ...load, url: gatehouse.url, path: '/v1/auth/login', headers: { ...load.headers, authorization: setup.basic }, variants: setup.users.map((u) => ({ body: JSON.stringify({ email: u.email, password: u.password, client_id: setup.clientId }) })) },
          workDir,
          `gatehouse-${id}`,
        );
        let after = await hashing(metricsPort);
        for (let waited = 0; (after.running > 0 || after.waiting > 0) && waited < 30_000; waited += 100) {
          await settle(100);
          after = await hashing(metricsPort);
        }
        await gatehouse.stop();
        // Answers a computation stood behind: signed in, wrong password, or a refused account (a 429 or 503 has none).
        const computedAnswers = ours.run.ok + (ours.run.statusCodes['401'] ?? 0) + (ours.run.statusCodes['403'] ?? 0);
        const computed = after.total - before.total;
        rows.push(
          `| Gatehouse SQLite, round ${round}${bound === undefined ? '' : `, bound ${bound} ms`} | ${(ours.run.ok / ours.run.seconds).toFixed(1)} | ${ours.run.ok} | ${others(ours)} | ${ours.run.timeouts} | ${ours.run.latency.p50} / ${ours.run.latency.p99} | ${computed} | ${after.skipped - before.skipped} | ${after.overdue - before.overdue} | ${computed - computedAnswers} |`,
        );
      }

      // The reference: bare Fastify + argon2 verify, no queue of its own (libuv's pool is the queue).
      const refPort = await freePort();
      const refDir = join(workDir, `data-ref-${round}`);
      mkdirSync(refDir);
      const ref = await startServer({
        name: `ref-argon2-${round}`,
        command: process.execPath,
        args: ['--import', 'tsx', join(ROOT, 'bench', 'http', 'ref-fastify.ts'), 'argon2', String(refPort), refDir],
        cwd: ROOT,
        port: refPort,
        logFile: join(workDir, `ref-${round}.log`),
        readyPath: '/__bench/ready',
        env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' },
      });
      servers.push(ref);
      const logins = ((await (await fetch(`${ref.url}/__bench/setup`)).json()) as { logins: Array<{ email: string; password: string }> }).logins;
      const theirs = await drive({ ...load, url: ref.url, path: '/login', variants: logins.map((l) => ({ body: JSON.stringify(l) })) }, workDir, `ref-${round}`);
      await ref.stop();
      rows.push(`| reference, round ${round} | ${(theirs.run.ok / theirs.run.seconds).toFixed(1)} | ${theirs.run.ok} | ${others(theirs)} | ${theirs.run.timeouts} | ${theirs.run.latency.p50} / ${theirs.run.latency.p99} | – | – | – | – |`);
    }
  } finally {
    for (const server of servers) await server.stop().catch(() => undefined);
    rmSync(workDir, { recursive: true, force: true });
  }
  console.log(`\nlogin flood: ${connections} connections, each login given up after ${timeout} s, ${duration} s per run\n`);
  console.log('| target | answered logins/s | 2xx | other answers | given up | p50 / p99 ms of the answered | argon2 run | argon2 skipped | argon2 overdue (503) | run for clients gone |');
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|');
  for (const row of rows) console.log(row);
}
