import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { run as runCliCommand } from '../../src/cli/run.js';
import { createStorage } from '../../src/storage/connect.js';
import { TEST_ADMIN_TOKEN, TEST_DIALECT, TEST_SECRET_KEY, buildTestApp, createTestStorage, type TestApp } from './app.js';

/** Helpers for tests that run Gatehouse as a separate process (CLI, `npm start`). */

/** The command line of a process (Linux /proc). */
export const commandLineOf = (pid: number): string[] => readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').filter(Boolean);

/**
 * The fields of a /proc `stat` line after the parenthesised command name (`state` first, so field N of
 * proc(5) is at N - 3). Cut at the last `)`: the name itself may hold `) `.
 */
export const statFieldsOf = (statPath: string): string[] => {
  const line = readFileSync(statPath, 'utf8');
  return line.slice(line.lastIndexOf(')') + 2).split(' ');
};

/** The live child processes of `pid` (Linux /proc). */
export const childrenOf = (pid: number): number[] =>
  readdirSync('/proc')
    .filter((entry) => /^\d+$/.test(entry))
    .filter((entry) => {
      try {
        return Number(statFieldsOf(`/proc/${entry}/stat`)[1]) === pid; // ppid, field 4
      } catch {
        return false; // gone meanwhile
      }
    })
    .map(Number);

/**
 * The node processes among a process's children: a cluster's workers. Started through tsx with a cold
 * transform cache, the primary also has esbuild's service process as a child.
 */
export const nodeChildrenOf = (pid: number): number[] =>
  childrenOf(pid).filter((child) => {
    try {
      return commandLineOf(child)[0] === process.execPath;
    } catch {
      return false; // gone meanwhile
    }
  });

/** Whether a process with this pid still exists (signal 0 probes without signalling). */
export const isProcessAlive = (pid: number): boolean => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

export interface Finished {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/**
 * A clean environment: nothing from the developer's shell (ADMIN_TOKEN, IDP_*…) leaks in. No drain on
 * SIGTERM unless a test asks for one (no proxy is watching /readyz; the drain has tests of its own).
 */
export function childEnv(overrides: Record<string, string>): Record<string, string> {
  return { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? tmpdir(), NODE_ENV: 'test', LOG_LEVEL: 'warn', SHUTDOWN_DRAIN_SECONDS: '0', ...overrides };
}

export function start(args: string[], env: Record<string, string>): { child: ChildProcess; done: Promise<Finished>; output: () => { stdout: string; stderr: string } } {
  const child = spawn(process.execPath, args, { env, cwd: process.cwd(), stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (chunk) => (stdout += chunk));
  child.stderr!.on('data', (chunk) => (stderr += chunk));
  const done = new Promise<Finished>((resolve) => child.on('close', (code, signal) => resolve({ code, signal, stdout, stderr })));
  return { child, done, output: () => ({ stdout, stderr }) };
}

/** Runs `gatehouse <args>` through the package's bin shim and waits for it to exit. */
export function runCli(args: string[], env: Record<string, string>): Promise<Finished> {
  return start(['bin/gatehouse.cjs', ...args], env).done;
}

/**
 * The same CLI command run inside the test process (src/cli/run.ts with this environment and captured
 * output): what runCli proves minus the process wiring, without a process start (seconds each).
 */
export async function runCliInProcess(args: string[], env: Record<string, string>): Promise<Finished> {
  let stdout = '';
  let stderr = '';
  const code = await runCliCommand(args, { env, out: (text) => (stdout += text), err: (text) => (stderr += text) });
  return { code, signal: null, stdout, stderr };
}

/** A fresh database for a child process (a temp SQLite file, or a new PostgreSQL database) and a data directory; `drop` removes both. */
export async function freshDatabaseUrl(): Promise<{ url: string; dataDir: string; drop: () => Promise<void> }> {
  const dataDir = mkdtempSync(join(tmpdir(), 'gatehouse-test-'));
  const removeDataDir = () => rmSync(dataDir, { recursive: true, force: true });
  if (TEST_DIALECT === 'sqlite') return { url: `sqlite:${join(dataDir, 'gatehouse.db')}`, dataDir, drop: async () => removeDataDir() };
  const { storage, url, drop } = await createTestStorage();
  await storage.close();
  return {
    url,
    dataDir,
    drop: async () => {
      await drop();
      removeDataDir();
    },
  };
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address() as { port: number };
      server.close(() => resolve(port));
    });
  });
}

/** A test app listening on a free loopback port, BASE_URL set to it: for real clients that speak HTTP. */
export async function listeningTestApp(env: Record<string, string> = {}): Promise<{ t: TestApp; base: string }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const t = await buildTestApp({ env: { BASE_URL: base, ...env } });
  await t.app.listen({ port, host: '127.0.0.1' });
  return { t, base };
}

/**
 * Starts `src/server.ts` in its own process on a free loopback port (or `options.port`: a restart behind a proxy) against `database`, and waits
 * until `/readyz` answers 200 (throws with the server's stderr if it exits or never gets ready).
 */
export async function startServer(
  database: { url: string; dataDir: string },
  env: Record<string, string> = {},
  options: { port?: number } = {},
): Promise<ReturnType<typeof start> & { port: number }> {
  const port = options.port ?? (await freePort());
  const server = start(
    ['--import', 'tsx', 'src/server.ts'],
    childEnv({
      PORT: String(port),
      HOST: '127.0.0.1',
      BASE_URL: `http://127.0.0.1:${port}`,
      DATA_DIR: database.dataDir,
      DATABASE_URL: database.url,
      SECRET_KEY: TEST_SECRET_KEY,
      ADMIN_TOKEN: TEST_ADMIN_TOKEN,
      ...env,
    }),
  );
  let gone = false;
  void server.done.then(() => (gone = true));
  for (let attempt = 0; attempt < 300 && !gone; attempt++) {
    if (await fetch(`http://127.0.0.1:${port}/readyz`).then((r) => r.status === 200, () => false)) return { ...server, port };
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
  server.child.kill('SIGKILL');
  throw new Error(`server did not get ready: ${server.output().stderr.slice(-2000)}`);
}

/**
 * `count` servers on one fresh database, started one at a time (so later ones find the first one's
 * migrations and keys), and a storage handle on that database; `stop` kills them and drops it.
 */
export async function startServersOnOneDatabase(count: number, env: Record<string, string> = {}) {
  const database = await freshDatabaseUrl();
  const servers: Array<Awaited<ReturnType<typeof startServer>>> = [];
  for (let i = 0; i < count; i++) servers.push(await startServer(database, env));
  const storage = createStorage(database.url);
  const stop = async () => {
    for (const server of servers) if (server.child.exitCode === null) server.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.done));
    await storage.close();
    await database.drop();
  };
  return { servers, storage, stop };
}

