import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { SERVER_NODE_FLAGS, SERVER_START_ARGS, THREAD_POOL_PRELOAD, withServerFlags } from '../../src/node-flags.js';
import { childEnv, commandLineOf, freePort, freshDatabaseUrl, nodeChildrenOf, start, statFieldsOf } from '../helpers/processes.js';

/** `npm start`'s command line, as package.json has it. */
const startScript = (JSON.parse(readFileSync('package.json', 'utf8')) as { scripts: { start: string } }).scripts.start;

/** Each thread of a process and its nice value (field 19 of its stat line). */
const threadNiceOf = (pid: number) =>
  new Map(readdirSync(`/proc/${pid}/task`).map((tid) => [Number(tid), Number(statFieldsOf(`/proc/${pid}/task/${tid}/stat`)[16])]));
/** How many of the threads (one snapshot of threadNiceOf) run at `nice`. */
const countAt = (threads: Map<number, number>, nice: number) => [...threads.values()].filter((value) => value === nice).length;

describe('the server processes run with the server\'s V8 flags and thread pool preload (src/node-flags.ts)', () => {
  it('npm start is node with the flags and the preload, loading tsx in-process', () => {
    expect(startScript).toBe(`node ${SERVER_START_ARGS.join(' ')} --import tsx src/server.ts`);
  });

  it('the Docker image starts the build with the flags and the preload', () => {
    const command = /^CMD (\[.*\])$/m.exec(readFileSync('Dockerfile', 'utf8'))?.[1];
    expect(JSON.parse(command!)).toEqual(['node', ...SERVER_START_ARGS, 'dist/src/server.js']);
  });

  it.each<{ given?: string; expected: string }>([
    // One thread more than the password line's cores + 1, never fewer than libuv's default.
    { expected: String(Math.max(4, availableParallelism() + 2)) },
    { given: '7', expected: '7' },
    { given: '2', expected: '2' },
  ])('the preload sets UV_THREADPOOL_SIZE unless the operator did: given $given, it is $expected', async ({ given, expected }) => {
    const env = childEnv(given === undefined ? {} : { UV_THREADPOOL_SIZE: given });
    const ended = await start([...THREAD_POOL_PRELOAD, '-e', 'process.stdout.write(process.env.UV_THREADPOOL_SIZE)'], env).done;
    expect(ended.stdout).toBe(expected);
  });

  it.each([
    { execArgv: [], expected: ['--max-semi-space-size=4', '--heap-growing-percent=20'] },
    { execArgv: ['--import', 'tsx'], expected: ['--max-semi-space-size=4', '--heap-growing-percent=20', '--import', 'tsx'] },
    {
      execArgv: ['--max-semi-space-size=4', '--heap-growing-percent=20', '--import', 'tsx'],
      expected: ['--max-semi-space-size=4', '--heap-growing-percent=20', '--import', 'tsx'],
    },
    { execArgv: ['--max-semi-space-size=8'], expected: ['--heap-growing-percent=20', '--max-semi-space-size=8'] },
    { execArgv: ['--heap-growing-percent=50'], expected: ['--max-semi-space-size=4', '--heap-growing-percent=50'] },
  ])('a cluster worker of a primary started with $execArgv runs with $expected', ({ execArgv, expected }) => {
    expect(withServerFlags(execArgv)).toEqual(expected);
  });
});

/** docs/guides/run-and-test.md#run-it / the brief: a fresh `npm start` answers /readyz within 10 s. */
const READY_WITHIN_MS = 10_000;
/** A cluster primary builds the app once before forking, so WORKERS=2 gets a wider budget. */
const CLUSTER_READY_WITHIN_MS = 30_000;

async function waitForReady(port: number, exited: Promise<unknown>, withinMs: number): Promise<void> {
  const startedAt = Date.now();
  let gone = false;
  void exited.then(() => (gone = true));
  while (Date.now() - startedAt < withinMs && !gone) {
    try {
      const res = await fetch(`http://127.0.0.1:${port}/readyz`);
      if (res.status === 200) return;
    } catch {
      // not listening yet
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  throw new Error(gone ? 'the server exited before it was ready' : `not ready within ${withinMs} ms`);
}

/** `npm start` (its node command line from package.json) on a fresh data directory, as an operator runs it. */
describe('npm start', { timeout: 60_000 }, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  beforeAll(async () => {
    database = await freshDatabaseUrl();
  });
  afterAll(async () => database.drop());
  // A failed assertion must not leave a server running.
  const children: ChildProcess[] = [];
  afterEach(() => {
    for (const child of children.splice(0)) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
  });

  const serve = async (extra: Record<string, string> = {}, readyWithinMs = READY_WITHIN_MS, args = startScript.split(' ').slice(1)) => {
    const port = await freePort();
    // No SECRET_KEY and no ADMIN_TOKEN: the development key is generated and the bootstrap developer printed.
    const env = childEnv({ PORT: String(port), DATA_DIR: database.dataDir, DATABASE_URL: database.url, ...extra });
    // Exactly npm start's node command line (tsx loaded in-process: one process, so a kill is reliable).
    const server = start(args, env);
    children.push(server.child);
    await waitForReady(port, server.done, readyWithinMs);
    return { port, server };
  };

  it('answers /readyz within 10 s, prints the bootstrap key once, and exits cleanly on SIGTERM', async () => {
    const first = await serve();
    const jwks = await fetch(`http://127.0.0.1:${first.port}/oauth/jwks`);
    expect(jwks.status).toBe(200);
    first.server.child.kill('SIGTERM');
    const ended = await first.server.done;
    expect(ended.code, ended.stderr).toBe(0);
    expect(ended.stdout).toMatch(/Bootstrap developer API key \(shown once, store it now\): dk_[A-Za-z0-9_-]{43}/);
    expect(ended.stdout).toMatch(/Bootstrap developer: dev_\S+ \(bootstrap@localhost\)/);
    expect(ended.stdout).toContain(`Console: http://localhost:${first.port}/console`);
    expect(ended.stdout).toContain(`http://localhost:${first.port}/dev/mailbox`);
    expect(ended.stderr).toMatch(/SECRET_KEY is not set: generated a development key/);

    const apiKey = /(dk_[A-Za-z0-9_-]{43})/.exec(ended.stdout)![1]!;
    const again = await serve();
    const apps = await fetch(`http://127.0.0.1:${again.port}/v1/dev/apps`, { headers: { authorization: `Bearer ${apiKey}` } });
    expect(apps.status).toBe(200);
    expect((await apps.json()).items).toMatchObject([{ name: 'demo', type: 'public', redirect_uris: [`http://localhost:${first.port}/demo/callback`] }]);
    again.server.child.kill('SIGTERM');
    const second = await again.server.done;
    expect(second.code).toBe(0);
    expect(second.stdout).not.toMatch(/Bootstrap developer API key/);
  });

  // The operator's slip: the data directory (where the development SECRET_KEY lives) moved, the
  // database did not. The new directory gets a new key, which cannot open the stored signing keys.
  it('stops with a message naming SECRET_KEY when the database was set up with another key', async () => {
    const first = await serve();
    first.server.child.kill('SIGTERM');
    expect((await first.server.done).code).toBe(0);

    const otherDataDir = mkdtempSync(join(tmpdir(), 'gatehouse-other-data-'));
    try {
      const port = await freePort();
      const server = start(startScript.split(' ').slice(1), childEnv({ PORT: String(port), DATA_DIR: otherDataDir, DATABASE_URL: database.url }));
      children.push(server.child);
      const ended = await server.done;
      expect(ended.code).toBe(1);
      expect(ended.stderr).toMatch(/^fatal: the signing keys in the database do not open with this SECRET_KEY: the database was set up with another one\. Start with the SECRET_KEY it was set up with \(when SECRET_KEY is not set, the development key is read from DATA_DIR\/secret\.key\)$/m);
      expect(ended.stderr).not.toMatch(/unable to authenticate data|\n\s+at /);
      const generatedKey = readFileSync(join(otherDataDir, 'secret.key'), 'utf8').trim();
      expect(ended.stdout + ended.stderr).not.toContain(generatedKey);
    } finally {
      rmSync(otherDataDir, { recursive: true, force: true });
    }
  });

  // src/shared/thread-pool.ts: libuv's pool at nice 10, every other thread (the event loop first) as
  // started. src/auth/passwords.ts: the password line one per core plus one, one fewer than the pool.
  const cores = availableParallelism();
  it.each<{ env: Record<string, string>; poolThreads: number; passwordChecksAtOnce: number }>([
    { env: {}, poolThreads: Math.max(4, cores + 2), passwordChecksAtOnce: cores + 1 },
    { env: { UV_THREADPOOL_SIZE: '6' }, poolThreads: 6, passwordChecksAtOnce: Math.min(cores + 1, 5) },
    // The operator's smaller pool shortens the line: one thread always stays free.
    { env: { UV_THREADPOOL_SIZE: '3' }, poolThreads: 3, passwordChecksAtOnce: Math.min(cores + 1, 2) },
  ])('runs each of libuv\'s $poolThreads pool threads at nice 10, the event loop at 0, and $passwordChecksAtOnce password checks at once ($env)', async ({ env, poolThreads, passwordChecksAtOnce }) => {
    const metricsPort = await freePort();
    const { server } = await serve({ METRICS: '1', METRICS_PORT: String(metricsPort), ...env });
    const pid = server.child.pid!;
    // One snapshot: a thread started between two reads would make their counts disagree.
    const threads = threadNiceOf(pid);
    expect(threads.get(pid)).toBe(0);
    expect(countAt(threads, 10)).toBe(poolThreads);
    expect(countAt(threads, 0)).toBe(threads.size - poolThreads);
    const metrics = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^gatehouse_password_hashing_limit ${passwordChecksAtOnce}$`, 'm'));
  });

  it('`gatehouse serve` with WORKERS=2 serves through node:cluster, its workers with the V8 flags and the sized pool at nice 10, and stops every process on SIGTERM', async () => {
    // The CLI started without the V8 flags, as `npx gatehouse serve` is: the workers get them all the
    // same, and the pool's size (bin/gatehouse.cjs requires the preload) through the environment.
    const { server } = await serve({ WORKERS: '2' }, CLUSTER_READY_WITHIN_MS, ['bin/gatehouse.cjs', 'serve']);
    const workers = nodeChildrenOf(server.child.pid!);
    expect(workers).toHaveLength(2);
    const poolThreads = Math.max(4, cores + 2);
    for (const worker of workers) {
      expect(commandLineOf(worker)).toEqual(expect.arrayContaining([...SERVER_NODE_FLAGS]));
      // A worker's environment as it was started, which the primary's preload had set.
      expect(readFileSync(`/proc/${worker}/environ`, 'utf8').split('\0')).toContain(`UV_THREADPOOL_SIZE=${poolThreads}`);
    }
    // /readyz answers as soon as one worker listens: the other may still be starting.
    await expect.poll(() => workers.map((worker) => countAt(threadNiceOf(worker), 10)), { timeout: 20_000 }).toEqual([poolThreads, poolThreads]);
    expect(countAt(threadNiceOf(server.child.pid!), 10)).toBe(0);
    server.child.kill('SIGTERM');
    const ended = await server.done;
    expect(ended.code, ended.stderr).toBe(0);
  });
});
