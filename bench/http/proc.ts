import { StringDecoder } from 'node:string_decoder';
import { type ChildProcess, spawn } from 'node:child_process';
import { closeSync, openSync, readdirSync, readFileSync, readSync, statSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { setTimeout as sleep } from 'node:timers/promises';
import type { LoadJob, LoadResult } from './load.js';

/** Process helpers for the HTTP benchmark: free ports, server processes, readiness, RSS sampling. */

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

export interface ServerProcess {
  name: string;
  proc: ChildProcess;
  pid: number;
  url: string;
  logFile: string;
  /** Resolves with the exit code (or signal name) once the process has exited. */
  exited: Promise<string>;
  stop(): Promise<string>;
}

/**
 * Spawns a server process with stdout and stderr going to `logFile` (a real file, as a production log
 * collector would read, so logging costs what it costs), then waits until `readyPath` answers 2xx.
 */
export async function startServer(opts: {
  name: string;
  command: string;
  args: string[];
  env: Record<string, string | undefined>;
  port: number;
  logFile: string;
  readyPath?: string;
  cwd?: string;
  timeoutMs?: number;
}): Promise<ServerProcess> {
  const fd = openSync(opts.logFile, 'a');
  const proc = spawn(opts.command, opts.args, { cwd: opts.cwd, env: opts.env as NodeJS.ProcessEnv, stdio: ['ignore', fd, fd] });
  closeSync(fd);
  let exitInfo: string | undefined;
  const exited = new Promise<string>((resolve) => {
    proc.once('exit', (code, signal) => {
      exitInfo = signal ?? String(code);
      resolve(exitInfo);
    });
  });
  const url = `http://127.0.0.1:${opts.port}`;
  const deadline = Date.now() + (opts.timeoutMs ?? 90_000);
  const readyPath = opts.readyPath ?? '/healthz';
  for (;;) {
    if (exitInfo !== undefined) {
      throw new Error(`${opts.name} exited (${exitInfo}) before it was ready; last log lines:\n${tail(opts.logFile, 25)}`);
    }
    try {
      const res = await fetch(url + readyPath, { signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      if (res.ok) break;
    } catch {
      // not listening yet
    }
    if (Date.now() > deadline) {
      proc.kill('SIGKILL');
      throw new Error(`${opts.name} did not become ready within ${(opts.timeoutMs ?? 90_000) / 1000} s; last log lines:\n${tail(opts.logFile, 25)}`);
    }
    await sleep(100);
  }
  const stop = async (): Promise<string> => {
    if (exitInfo !== undefined) return exitInfo;
    proc.kill('SIGTERM');
    const timer = setTimeout(() => proc.kill('SIGKILL'), 20_000);
    const info = await exited;
    clearTimeout(timer);
    return info;
  };
  return { name: opts.name, proc, pid: proc.pid!, url, logFile: opts.logFile, exited, stop };
}

export function tail(file: string, lines: number): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n');
  } catch {
    return '(no log)';
  }
}

export function fileSize(file: string): number {
  try {
    return statSync(file).size;
  } catch {
    return 0;
  }
}

/** VmRSS of a process in bytes (Linux /proc), or undefined when it is gone. */
export function rssBytes(pid: number): number | undefined {
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8');
    const m = /^VmRSS:\s+(\d+)\s+kB/m.exec(status);
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/** A process's children (Linux /proc), none when it is gone. */
function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
}

/** Samples VmRSS every `everyMs` until stopped; returns the maximum seen. */
/** What sampleRss saw: the largest RSS, and the largest in each fifth of the samples (its course: growth, spikes). */
export interface RssSummary {
  max: number;
  fifthsMax: number[];
}

export function sampleRss(pid: number, everyMs = 200): { stop(): RssSummary } {
  const samples: number[] = [];
  // With WORKERS > 1 the cluster workers serve: the largest process of the server is what one instance needs.
  const take = () => {
    const v = [pid, ...childPids(pid)].map(rssBytes).reduce<number | undefined>((a, b) => (b === undefined ? a : Math.max(a ?? 0, b)), undefined);
    if (v !== undefined) samples.push(v);
  };
  take();
  const timer = setInterval(take, everyMs);
  return {
    stop() {
      clearInterval(timer);
      take();
      const maxOf = (xs: number[]) => xs.reduce((a, b) => Math.max(a, b), 0);
      const fifths = [0, 1, 2, 3, 4].map((k) => samples.slice(Math.floor((k * samples.length) / 5), Math.max(Math.floor(((k + 1) * samples.length) / 5), 1)));
      return { max: maxOf(samples), fifthsMax: fifths.map(maxOf) };
    },
  };
}

/**
 * Runs `fn(0 … count-1)` with at most `concurrency` in flight; stops starting new ones when `until()`
 * says so. Results are in index order (only the indexes that ran, when stopped early).
 */
export async function parallel<T>(count: number, concurrency: number, fn: (i: number) => Promise<T>, until?: () => boolean): Promise<T[]> {
  const out: Array<{ i: number; v: T }> = [];
  let next = 0;
  let failure: unknown;
  const worker = async () => {
    while (failure === undefined && next < count && !(until && until())) {
      const i = next++;
      try {
        out.push({ i, v: await fn(i) });
      } catch (error) {
        failure ??= error;
      }
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, count) }, worker));
  if (failure !== undefined) throw failure;
  return out.sort((a, b) => a.i - b.i).map((x) => x.v);
}

// CPU accounting: how much of the machine went to something other than the run itself ----------------

const HZ = 100; // USER_HZ on Linux (`getconf CLK_TCK`)

interface CpuSnapshot {
  at: number;
  /** Busy ticks of the whole machine (/proc/stat: user nice system irq softirq steal). */
  busy: number;
  /** Ticks (utime + stime), command name and parent per live process. */
  procs: Map<number, { comm: string; ticks: number; ppid: number }>;
  /** Ticks of the server's main thread (the event loop), when a server was named. */
  serverMainThread?: number;
}

/** Command name and ticks (utime + stime) from a /proc stat file: a process's, or one of its threads'. */
function statTicks(file: string): { comm: string; ticks: number; ppid: number } | undefined {
  try {
    const stat = readFileSync(file, 'utf8');
    const close = stat.lastIndexOf(')');
    const comm = stat.slice(stat.indexOf('(') + 1, close);
    const fields = stat.slice(close + 2).split(' ');
    // fields[0] is the state (field 3), fields[1] the parent (field 4); utime and stime are fields 14 and 15.
    return { comm, ticks: Number(fields[11]) + Number(fields[12]), ppid: Number(fields[1]) };
  } catch {
    return undefined;
  }
}

/** The machine's CPU now; with `serverPid`, its main thread's too (a thread's id is the process id for the main thread). */
export function cpuSnapshot(serverPid?: number): CpuSnapshot {
  const [, user, nice, system, , , irq, softirq, steal] = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).map(Number);
  const procs = new Map<number, { comm: string; ticks: number; ppid: number }>();
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const t = statTicks(`/proc/${name}/stat`);
    if (t) procs.set(Number(name), t);
  }
  const serverMainThread = serverPid === undefined ? undefined : statTicks(`/proc/${serverPid}/task/${serverPid}/stat`)?.ticks;
  return { at: performance.now(), busy: user! + nice! + system! + irq! + softirq! + steal!, procs, serverMainThread };
}

export interface CpuShare {
  /** Average cores used over the window. */
  server: number;
  /**
   * The part of `server` that its main thread used: the event loop, where a Node server's requests
   * queue. The rest is its other threads (libuv's pool: argon2, RS256; the signing worker; V8's GC).
   */
  serverMainThread: number;
  database: number;
  loadGenerator: number;
  /** Everything else on the machine (other people's work, this harness): what disturbed the run. */
  foreign: number;
}

/**
 * Splits the machine's CPU over a window: the server process (and its main thread, when both snapshots
 * named it), the database server (processes named `postgres`), the load generator (its own cpuUsage, as
 * it has exited) and the rest.
 */
export function cpuShare(before: CpuSnapshot, after: CpuSnapshot, serverPid: number, loadGeneratorSeconds: number): CpuShare {
  const seconds = (after.at - before.at) / 1000;
  const delta = (pid: number, a: { ticks: number }) => a.ticks - (before.procs.get(pid)?.ticks ?? 0);
  let server = 0;
  let database = 0;
  for (const [pid, a] of after.procs) {
    // A server started with WORKERS > 1 serves from its cluster workers, its children.
    if (pid === serverPid || a.ppid === serverPid) server += delta(pid, a);
    else if (a.comm === 'postgres') database += delta(pid, a);
  }
  const busy = (after.busy - before.busy) / HZ;
  const serverS = server / HZ;
  const databaseS = database / HZ;
  const foreign = Math.max(0, busy - serverS - databaseS - loadGeneratorSeconds);
  const mainThreadS = ((after.serverMainThread ?? 0) - (before.serverMainThread ?? 0)) / HZ;
  return { server: serverS / seconds, serverMainThread: mainThreadS / seconds, database: databaseS / seconds, loadGenerator: loadGeneratorSeconds / seconds, foreign: foreign / seconds };
}

/**
 * Error lines (pino level ≥ 50) a server logged from byte `from` on: their count and the distinct
 * messages (error type and message, at most `max`), to say what a run's 5xx answers were.
 */
export function loggedErrors(file: string, from: number, max = 3): { count: number; kinds: string[] } {
  const size = fileSize(file);
  if (size <= from) return { count: 0, kinds: [] };
  let count = 0;
  const kinds = new Map<string, number>();
  // Read in chunks: a long run's log (5 minutes of bearer reads: ~1 GB) is more than one string can hold.
  const fd = openSync(file, 'r');
  const chunk = Buffer.alloc(8 * 2 ** 20);
  const decoder = new StringDecoder('utf8'); // a character split between two chunks stays whole
  let carry = '';
  try {
    for (let at = from; at < size; ) {
      const n = readSync(fd, chunk, 0, Math.min(chunk.length, size - at), at);
      if (n <= 0) break;
      at += n;
      const text = carry + decoder.write(chunk.subarray(0, n));
      const lines = text.split('\n');
      carry = at < size ? lines.pop()! : '';
      for (const line of lines) countErrorLine(line);
    }
    countErrorLine(carry);
  } finally {
    closeSync(fd);
  }
  return { count, kinds: [...kinds.entries()].sort((a, b) => b[1] - a[1]).slice(0, max).map(([k, n]) => `${n}× ${k}`) };

  function countErrorLine(line: string): void {
    if (!/"level":(5\d|60)/.test(line)) return;
    count++;
    let kind = line.slice(0, 200);
    try {
      const entry = JSON.parse(line) as { msg?: string; err?: { type?: string; message?: string } };
      kind = `${entry.err?.type ?? ''}${entry.err?.message ? `: ${entry.err.message}` : ''} (${entry.msg ?? ''})`;
    } catch {
      // not JSON: keep the raw start of the line
    }
    kinds.set(kind, (kinds.get(kind) ?? 0) + 1);
  }
}

const LOAD_SCRIPT = join(dirname(fileURLToPath(import.meta.url)), 'load.ts');
const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

/**
 * Runs one job of the load generator (`load.ts`) in a process of its own, never the one that serves or
 * samples: writes the job beside its result file, waits for the process, and reads the result.
 */
export async function runLoadGenerator(job: LoadJob): Promise<LoadResult> {
  const jobFile = job.resultFile.replace(/\.json$/, '.job.json');
  writeFileSync(jobFile, JSON.stringify(job));
  const child = spawn(process.execPath, ['--import', 'tsx', LOAD_SCRIPT, jobFile], {
    cwd: ROOT,
    env: { ...process.env, NODE_ENV: 'production' },
    stdio: ['ignore', 'inherit', 'inherit'],
  });
  const code = await new Promise<number | null>((done) => child.once('exit', done));
  if (code !== 0) throw new Error(`load generator exited with ${code}`);
  return JSON.parse(readFileSync(job.resultFile, 'utf8')) as LoadResult;
}
