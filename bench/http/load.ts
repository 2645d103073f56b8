import autocannon from 'autocannon';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';

/**
 * The load generator of `npm run bench -- http`, always run in its own process (never in the one that
 * serves): `node --import tsx bench/http/load.ts <job.json>`. Drives one scenario with autocannon:
 * an optional warm-up, a pause for the warm-up's unanswered requests, then the measured run, and writes
 * a summary to `job.resultFile`.
 *
 * Requests are either fixed, rotated over a few `variants` (e.g. one access token per user), or taken
 * from a pool file (one request body per line) where every body is sent exactly once, across warm-up
 * and run. When a pool runs dry the run is stopped at once and the time is reported (`dryAt`): its
 * figures are then not a full run.
 */

export interface LoadJob {
  url: string;
  connections: number;
  /** Requests per second over all connections (autocannon's overallRate); unset = as fast as answered. */
  rate?: number;
  /** Seconds of the measured run. */
  duration: number;
  /** Seconds of warm-up before it (same pool), not counted. 0 = none. */
  warmup: number;
  /** Seconds after which a request is given up: autocannon closes its connection and sends anew on another. Default 30. */
  timeout?: number;
  method: 'GET' | 'POST';
  /** The status that counts as answered (default: any 2xx); the authorize scenario's answer is a 302. */
  okStatus?: number;
  path: string;
  headers: Record<string, string>;
  body?: string;
  poolFile?: string;
  variants?: Array<{ path?: string; headers?: Record<string, string>; body?: string }>;
  resultFile: string;
  /** The server's process id: its CPU time over the measured run is read from /proc (serverCpu). */
  serverPid?: number;
}

export interface LoadSummary {
  seconds: number;
  total: number;
  ok: number;
  non2xx: number;
  statusCodes: Record<string, number>;
  errors: number;
  timeouts: number;
  /** 2xx responses per second over the run. */
  rps: number;
  /** autocannon's own mean of per-second response counts (all statuses). */
  reqAvg: number;
  latency: { p50: number; p90: number; p99: number; avg: number; max: number };
}

export interface LoadResult {
  warmup?: LoadSummary;
  run: LoadSummary;
  poolSize?: number;
  poolUsed?: number;
  /** Seconds into the measured run when the pool ran dry (-1: during warm-up). */
  dryAt?: number;
  /** CPU seconds this load generator used (user + system), start-up included. */
  cpuSeconds?: number;
  /** The measured run on the system's monotonic clock in µs (the clock of V8 CPU profiles). */
  runStartUs?: number;
  runEndUs?: number;
  /** CPU time the server ran over the measured run (ns): all its threads, and its main thread (the event loop). */
  serverCpu?: { allNs: number; mainNs: number };
}

const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

/**
 * CPU time (ns) a server's threads have run so far, from /proc/<pid>/task/<tid>/schedstat (its first
 * field), with its cluster workers' when it has some: all threads, and the main threads (event loops).
 * Read by the load generator itself, right at the edges of the measured run.
 */
function serverCpuNs(pid: number): { allNs: number; mainNs: number } {
  const ran = (file: string) => {
    try {
      return Number(readFileSync(file, 'utf8').split(' ', 1)[0]);
    } catch {
      return 0; // a thread that ended between listing and reading
    }
  };
  let children: number[] = [];
  try {
    children = readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    // no children file: a single process
  }
  let allNs = 0;
  let mainNs = 0;
  for (const p of [pid, ...children]) {
    let tasks: string[] = [];
    try {
      tasks = readdirSync(`/proc/${p}/task`);
    } catch {
      continue;
    }
    for (const tid of tasks) {
      const ns = ran(`/proc/${p}/task/${tid}/schedstat`);
      allNs += ns;
      if (tid === String(p)) mainNs += ns;
    }
  }
  return { allNs, mainNs };
}

const DRY_PATH = '/__bench_pool_dry__';

/**
 * How long the measured run waits after the warm-up. autocannon ends a run by destroying its sockets, and
 * the server still finishes the requests they had in flight (the argon2 reference computes a queued login
 * all the same; Gatehouse skips those whose turn has not come, but finishes the ones running). Measured
 * at once, the run's first requests would queue behind those: twice the connections in flight, which
 * showed as a login p99 30–60 ms above the steady state's. The orphans are done within the longest
 * latency the warm-up saw, plus a margin.
 */
const settleMs = (warmup: LoadSummary) => Math.min(5_000, warmup.latency.max + 50);

function summarize(r: autocannon.Result, okStatus?: number): LoadSummary {
  const statusCodes: Record<string, number> = {};
  for (const [code, v] of Object.entries((r as unknown as { statusCodeStats?: Record<string, { count: number }> }).statusCodeStats ?? {})) statusCodes[code] = v.count;
  const ok = okStatus === undefined ? r['2xx'] : (statusCodes[okStatus] ?? 0);
  const seconds = r.duration;
  return {
    seconds,
    total: r.requests.total,
    ok,
    non2xx: okStatus === undefined ? r.non2xx : r.requests.total - ok,
    statusCodes,
    errors: r.errors,
    timeouts: r.timeouts,
    rps: seconds > 0 ? ok / seconds : 0,
    reqAvg: r.requests.average,
    latency: { p50: r.latency.p50, p90: r.latency.p90, p99: r.latency.p99, avg: r.latency.average, max: r.latency.max },
  };
}

async function main(): Promise<void> {
  const job = JSON.parse(readFileSync(process.argv[2]!, 'utf8')) as LoadJob;
  const pool = job.poolFile ? readFileSync(job.poolFile, 'utf8').split('\n').filter(Boolean) : undefined;
  let next = 0;
  let dry = false;
  let dryAt: number | undefined;
  let dryRequests = 0;
  let current: autocannon.Instance | undefined;
  let phase: 'warmup' | 'run' = 'warmup';
  let runStarted = 0;

  const base = { method: job.method, path: job.path, headers: job.headers, body: job.body };
  let requests: autocannon.Request[];
  if (pool) {
    requests = [
      {
        ...base,
        setupRequest: (req: autocannon.Request) => {
          if (next < pool.length) return { ...req, body: pool[next++] };
          if (!dry) {
            dry = true;
            dryAt = phase === 'warmup' ? -1 : (Date.now() - runStarted) / 1000;
            setImmediate(() => current?.stop());
          }
          // Never resend a used body: a harmless request (404) until autocannon stops at its next 1 s tick;
          // these are taken out of the status counts below.
          dryRequests++;
          return { ...req, method: 'GET', path: DRY_PATH, headers: {}, body: undefined };
        },
      } as autocannon.Request,
    ];
  } else if (job.variants?.length) {
    const variants = job.variants;
    let i = 0;
    requests = [
      {
        ...base,
        setupRequest: (req: autocannon.Request) => {
          const v = variants[i++ % variants.length]!;
          return { ...req, path: v.path ?? req.path, headers: { ...req.headers, ...v.headers }, body: v.body ?? req.body };
        },
      } as autocannon.Request,
    ];
  } else {
    requests = [base as autocannon.Request];
  }

  const run = (duration: number) =>
    new Promise<autocannon.Result>((resolve, reject) => {
      current = autocannon({ url: job.url, connections: job.connections, ...(job.rate ? { overallRate: job.rate } : {}), duration, timeout: job.timeout ?? 30, requests }, (err, result) => (err ? reject(err) : resolve(result)));
    });

  /** Removes the answers to pool-dry filler requests (404s) from a summary. */
  const withoutDry = (r: LoadSummary): LoadSummary => {
    const filler = Math.min(dryRequests, r.statusCodes['404'] ?? 0);
    dryRequests = 0;
    if (!filler) return r;
    const statusCodes: Record<string, number> = { ...r.statusCodes, 404: (r.statusCodes['404'] ?? 0) - filler };
    if (!statusCodes['404']) delete statusCodes['404'];
    return { ...r, statusCodes, non2xx: r.non2xx - filler, total: r.total - filler };
  };
  const result: Partial<LoadResult> = {};
  if (job.warmup > 0) {
    result.warmup = withoutDry(summarize(await run(job.warmup), job.okStatus));
    if (!dry) await new Promise((done) => setTimeout(done, settleMs(result.warmup!)));
  }
  if (!dry) {
    phase = 'run';
    runStarted = Date.now();
    const cpuBefore = job.serverPid === undefined ? undefined : serverCpuNs(job.serverPid);
    result.runStartUs = monotonicUs();
    result.run = withoutDry(summarize(await run(job.duration), job.okStatus));
    result.runEndUs = monotonicUs();
    if (cpuBefore) {
      const cpuAfter = serverCpuNs(job.serverPid!);
      result.serverCpu = { allNs: cpuAfter.allNs - cpuBefore.allNs, mainNs: cpuAfter.mainNs - cpuBefore.mainNs };
    }
  } else {
    result.run = { seconds: 0, total: 0, ok: 0, non2xx: 0, statusCodes: {}, errors: 0, timeouts: 0, rps: 0, reqAvg: 0, latency: { p50: 0, p90: 0, p99: 0, avg: 0, max: 0 } };
  }
  if (pool) {
    result.poolSize = pool.length;
    result.poolUsed = next;
  }
  if (dry) result.dryAt = dryAt;
  const cpu = process.cpuUsage();
  result.cpuSeconds = (cpu.user + cpu.system) / 1e6;
  writeFileSync(job.resultFile, JSON.stringify(result));
}

main().catch((error) => {
  console.error(error);
  process.exit(1);
});
