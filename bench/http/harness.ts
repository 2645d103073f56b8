import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import {
  authorizeQuery,
  codeBody,
  exchangeCode,
  type GatehouseEnv,
  type GatehouseSetup,
  logPath,
  type MintStats,
  mintCode,
  mintPool,
  refreshBody,
  refreshOnce,
  setupGatehouse,
  startGatehouse,
  withRetry,
} from './gatehouse.js';
import { SERVER_START_ARGS } from '../../src/node-flags.js';
import { scratchPostgresDatabase } from '../scratch-database.js';
import type { LoadJob, LoadResult, LoadSummary } from './load.js';
import { type CpuShare, cpuShare, cpuSnapshot, fileSize, freePort, loggedErrors, parallel, type RssSummary, runLoadGenerator, sampleRss, type ServerProcess, startServer } from './proc.js';
import { formatSummary, summarizeProfile, windowFileOf } from './profile-summary.js';

/** `npm run bench -- http [options]`; `--help` prints this. */
const USAGE = `\`npm run bench -- http [options]\`: the hot paths of the production build over HTTP,
against references measured in the same run. See bench/RESULTS.md ("http") for what it prints.

  --duration S       seconds of each measured run (default 10)
  --rounds N         rounds, each with fresh server processes; the median is quoted, and each ratio is
                     the median of the rounds' ratios (a round runs a scenario's targets back to back,
                     in an order that turns by one each round)
                     (default 3)
  --warmup S         seconds of warm-up before each measured run, same pool, not counted (default 1);
                     the run starts once the server has finished what the warm-up left in flight
  --connections N    autocannon connections (default 16)
  --rate R           offer R requests/s in every measured run (autocannon's overall rate; the burst's
                     bearer reads keep their own), as a soak at a set pace (default 0: as fast as
                     answered). Not a full run: RESULTS.md is written only with --write
  --only sqlite|postgres|refs   run one target only (refs = the references)
  --scenarios a,b    subset of: refresh, refresh-id, code, profile, login, authorize (a signed-in browser
                     asking for a code), healthz, burst (bearer reads at a fixed rate, alone and then
                     during a login run on the same server)
  --workers N        start Gatehouse with WORKERS=N (cluster workers sharing the port; CPU and RSS
                     then count the workers); default: the server's own default
  --no-refs          skip the references
  --pool N           largest pool of one-use codes/refresh tokens per run (default 100000); after
                     round 1, pools are sized from the best rate seen (1.6 × rate × (warm-up + run) + 2000)
  --mint-seconds S   time box for minting one Gatehouse refresh-token pool (default 60); tokens a run
                     never took are carried to the next round, so later rounds mint little
  --users N          Gatehouse users (default 16)
  --profile SCENARIO run only that scenario on Gatehouse (SQLite unless --only postgres), one round, under
                     \`node --cpu-prof\`; prints where the .cpuprofile landed and its top self-time functions
  --profile-dir DIR  where profiles go (default <tmp>/gatehouse-cpuprof/<time>-<scenario>-<db>)
  --baseline DIR     also measure the Gatehouse checkout in DIR (its node_modules installed; built with
                     \`npm run build\` there unless --no-build) on both databases, in the same rounds, and
                     print this build's req/s over the baseline's per scenario (a before/after comparison)
  --no-build         do not run \`npm run build\` first
  --cpu              also print the server's CPU time per answered request (µs, median of the rounds) per
                     scenario and Gatehouse target, side by side (with --baseline: after / before). Read
                     from /proc over the measured run (all the server's threads, and its main thread): it
                     moves less than req/s with what else the machine runs (though a slower run shares
                     fewer commits); every run line shows it
  --write / --no-write   write bench/RESULTS.md (default: only for a full run: duration ≥ 10, rounds ≥ 3,
                     every scenario, both databases, references, not --profile)
  --keep             keep the temp dir (server logs, pools)
PostgreSQL: a fresh database next to BENCH_DATABASE_URL or TEST_DATABASE_URL, dropped afterwards
(skipped with a message when neither is set).
`;

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..');

type ScenarioKey = 'refresh' | 'refresh-id' | 'code' | 'profile' | 'login' | 'authorize' | 'healthz' | 'burst';
type Database = 'sqlite' | 'postgres';
/** `-before` targets are the build given by `--baseline`, measured in the same rounds as this one. */
type Target = Database | 'sqlite-before' | 'postgres-before' | 'ref';
const TARGETS: readonly Target[] = ['sqlite', 'postgres', 'sqlite-before', 'postgres-before', 'ref'];
const TARGET_NAMES: Record<Target, string> = {
  sqlite: 'Gatehouse SQLite',
  postgres: 'Gatehouse PostgreSQL',
  'sqlite-before': 'baseline SQLite',
  'postgres-before': 'baseline PostgreSQL',
  ref: 'reference',
};

const SCENARIOS: Array<{ key: ScenarioKey; label: string; ref: string }> = [
  { key: 'refresh', label: '`refresh_token` grant, rotation, no id_token', ref: '`oidc-provider`' },
  { key: 'refresh-id', label: '`refresh_token` grant with id_token', ref: '`oidc-provider`' },
  { key: 'code', label: '`authorization_code` + PKCE grant', ref: '`oidc-provider`' },
  { key: 'profile', label: 'bearer read `GET /v1/profile/{userId}`', ref: 'bare Fastify + jose ES256 + SQLite SELECT' },
  { key: 'login', label: 'password login (argon2id)', ref: 'bare Fastify + argon2 `verify`, same implementation and parameters' },
  { key: 'authorize', label: 'hosted `GET /oauth/authorize` with a browser session (302 with a code)', ref: '–' },
  { key: 'healthz', label: '`GET /healthz`', ref: 'bare Fastify hello' },
];

/**
 * Token checks during a login burst: bearer reads at a fixed rate on few connections, the way
 * apps check tokens, measured alone and then while the login scenario runs against the same server.
 * What counts is that every one is answered, and how fast: argon2 keeps the cores busy during the burst,
 * and a token check must not wait for it.
 */
const BURST = { rate: 200, connections: 4 };

interface Options {
  duration: number;
  rounds: number;
  warmup: number;
  connections: number;
  rate?: number;
  only?: Target | 'refs';
  scenarios: ScenarioKey[];
  refs: boolean;
  pool: number;
  mintSeconds: number;
  users: number;
  profile?: ScenarioKey;
  profileDir?: string;
  build: boolean;
  workers?: number;
  baseline?: string;
  write?: boolean;
  keep: boolean;
  cpu: boolean;
}

function parseOptions(args: string[]): Options {
  const value = (name: string): string | undefined => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const num = (name: string, fallback: number) => {
    const v = value(name);
    if (v === undefined) return fallback;
    const n = Number(v);
    if (!Number.isFinite(n) || n < 0) throw new Error(`--${name} must be a number`);
    return n;
  };
  const known = new Set<ScenarioKey>([...SCENARIOS.map((s) => s.key), 'burst']);
  const asked = (value('scenarios')?.split(',').map((s) => s.trim()).filter(Boolean) ?? [...known]) as ScenarioKey[];
  for (const s of asked) if (!known.has(s)) throw new Error(`unknown scenario ${s} (${[...known].join(', ')})`);
  const scenarios = [...known].filter((s) => asked.includes(s)); // always run in the same order
  let only = value('only') as Options['only'];
  if (only === ('refs' as string)) only = 'ref';
  if (only && !TARGETS.includes(only as Target)) throw new Error('--only must be sqlite, postgres or refs');
  const profile = value('profile') as ScenarioKey | undefined;
  if (profile && !SCENARIOS.some((s) => s.key === profile)) throw new Error(`--profile: unknown scenario ${profile} (${SCENARIOS.map((s) => s.key).join(', ')})`);
  return {
    duration: num('duration', 10),
    rounds: Math.max(1, Math.floor(num('rounds', 3))),
    warmup: num('warmup', 1),
    connections: Math.max(1, Math.floor(num('connections', 16))),
    rate: num('rate', 0) || undefined,
    only,
    scenarios: profile ? [profile] : scenarios,
    refs: !args.includes('--no-refs'),
    pool: Math.max(100, Math.floor(num('pool', 100_000))),
    mintSeconds: num('mint-seconds', 60),
    users: Math.max(1, Math.floor(num('users', 16))),
    profile,
    profileDir: value('profile-dir'),
    build: !args.includes('--no-build'),
    workers: value('workers') !== undefined ? Math.max(1, Math.floor(num('workers', 1))) : undefined,
    baseline: value('baseline') ? resolve(value('baseline')!) : undefined,
    write: args.includes('--write') ? true : args.includes('--no-write') ? false : undefined,
    keep: args.includes('--keep'),
    cpu: args.includes('--cpu'),
  };
}

// Results ---------------------------------------------------------------------------------------------

interface RunRecord {
  round: number;
  rps: number;
  p50: number;
  p99: number;
  rssMax: number;
  /** The largest RSS in each fifth of the run (bytes): growth shows as a rising course. */
  rssFifths: number[];
  non2xx: number;
  statusCodes: Record<string, number>;
  errors: number;
  timeouts: number;
  warmupNon2xx: number;
  poolSize?: number;
  poolUsed?: number;
  dryAt?: number;
  logBytes: number;
  total: number;
  seconds: number;
  mint?: MintStats;
  /** Average cores over the load generator's life (start-up, warm-up and run). */
  cpu: CpuShare;
  /** Error lines in the server's log during the run. */
  serverErrors: { count: number; kinds: string[] };
  /** The server's CPU time per answered request over the measured run (µs): all its threads, and its main thread. */
  cpuPerRequest?: { all: number; main: number };
  /** PostgreSQL only: transactions committed and rows written (inserted, updated, deleted) per answered request, warm-up included. */
  dbWrites?: { transactions: number; rows: number };
}

const results = new Map<string, RunRecord[]>();

/** One round of the burst scenario: bearer reads alone, then beside the login load. */
interface BurstRecord {
  round: number;
  alone: LoadSummary;
  during: LoadSummary;
  login: LoadSummary;
  rssMax: number;
}
const burstResults = new Map<Target, BurstRecord[]>();
function recordBurst(target: Target, run: BurstRecord): void {
  burstResults.set(target, [...(burstResults.get(target) ?? []), run]);
  const l = (x: LoadSummary) => `p50 ${x.latency.p50} ms, p99 ${x.latency.p99} ms (${x.rps.toFixed(0)} 2xx/s, non-2xx ${x.non2xx})`;
  console.log(`  [round ${run.round}] burst @ ${target}: bearer alone ${l(run.alone)}; during logins ${l(run.during)}; logins ${run.login.rps.toFixed(0)} 2xx/s, p99 ${run.login.latency.p99} ms; RSS max ${(run.rssMax / 2 ** 20).toFixed(0)} MB`);
}
const keyOf = (scenario: ScenarioKey, target: Target) => `${scenario}|${target}`;
function record(scenario: ScenarioKey, target: Target, run: RunRecord): void {
  const k = keyOf(scenario, target);
  results.set(k, [...(results.get(k) ?? []), run]);
}
const median = (xs: number[]): number => {
  if (!xs.length) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};
/** Pool size for the next run: round 1 the cap, later 1.6 × the best rate seen × (warm-up + run) + 2000. */
function poolTarget(opts: Options, scenario: ScenarioKey, target: Target): number {
  const runs = results.get(keyOf(scenario, target)) ?? [];
  const rates = runs.filter((r) => r.dryAt === undefined && r.seconds > 0).map((r) => r.total / r.seconds);
  if (!rates.length) return opts.pool;
  return Math.min(opts.pool, Math.ceil(1.6 * Math.max(...rates) * (opts.warmup + opts.duration)) + 2000);
}

// Load runs ---------------------------------------------------------------------------------------------

const live = new Set<ServerProcess>();
/** What must be undone however the run ends (the PostgreSQL database). */
const cleanups = new Set<() => Promise<void>>();
let workDir = '';
let jobCounter = 0;

async function track<T extends ServerProcess>(p: Promise<T>): Promise<T> {
  const s = await p;
  live.add(s);
  return s;
}
async function stop(server: ServerProcess): Promise<void> {
  await server.stop();
  live.delete(server);
}

type JobSpec = Omit<LoadJob, 'url' | 'resultFile' | 'connections' | 'duration' | 'warmup' | 'poolFile' | 'serverPid'> & { pool?: string[]; connections?: number };

/** Runs autocannon in its own process against `server`, sampling the server's RSS meanwhile. */
type Driven = { result: LoadResult; rss: RssSummary; logBytes: number; cpu: CpuShare; serverErrors: { count: number; kinds: string[] } };

async function drive(opts: Options, server: ServerProcess, spec: JobSpec): Promise<Driven> {
  const id = ++jobCounter;
  const { pool, connections, ...rest } = spec;
  let poolFile: string | undefined;
  if (pool) {
    poolFile = join(workDir, `pool-${id}.txt`);
    writeFileSync(poolFile, pool.join('\n') + '\n');
  }
  const job: LoadJob = {
    ...(opts.rate ? { rate: opts.rate } : {}),
    ...rest,
    url: server.url,
    serverPid: server.pid,
    connections: connections ?? opts.connections,
    duration: opts.duration,
    warmup: opts.warmup,
    poolFile,
    resultFile: join(workDir, `result-${id}.json`),
  };
  const logBefore = fileSize(server.logFile);
  const cpuBefore = cpuSnapshot(server.pid);
  const rss = sampleRss(server.pid);
  let rssSeen: RssSummary;
  let result: LoadResult;
  try {
    result = await runLoadGenerator(job);
  } finally {
    rssSeen = rss.stop(); // also when it failed: the sampler's timer would keep the harness alive
  }
  const cpuAfter = cpuSnapshot(server.pid);
  const cpu = cpuShare(cpuBefore, cpuAfter, server.pid, result.cpuSeconds ?? 0);
  if (server.proc.exitCode !== null || server.proc.signalCode !== null) throw new Error(`${server.name} died during the run; see ${server.logFile}`);
  if (poolFile) rmSync(poolFile, { force: true });
  // What the server logged as errors during the run (warm-up included): says what the non-2xx were.
  const serverErrors = loggedErrors(server.logFile, logBefore);
  return { result, rss: rssSeen, logBytes: fileSize(server.logFile) - logBefore, cpu, serverErrors };
}

function toRecord(round: number, r: Driven, mint?: MintStats): RunRecord {
  const run = r.result.run;
  return {
    round,
    rps: run.rps,
    p50: run.latency.p50,
    p99: run.latency.p99,
    rssMax: r.rss.max,
    rssFifths: r.rss.fifthsMax,
    non2xx: run.non2xx,
    statusCodes: run.statusCodes,
    errors: run.errors,
    timeouts: run.timeouts,
    warmupNon2xx: r.result.warmup?.non2xx ?? 0,
    poolSize: r.result.poolSize,
    poolUsed: r.result.poolUsed,
    dryAt: r.result.dryAt,
    logBytes: r.logBytes,
    total: run.total,
    seconds: run.seconds,
    mint,
    cpu: r.cpu,
    cpuPerRequest: r.result.serverCpu && run.total > 0 ? { all: r.result.serverCpu.allNs / 1000 / run.total, main: r.result.serverCpu.mainNs / 1000 / run.total } : undefined,
    serverErrors: r.serverErrors,
  };
}

function describe(scenario: ScenarioKey, target: Target, rec: RunRecord): string {
  const codes = Object.entries(rec.statusCodes).map(([c, n]) => `${c}:${n}`).join(' ');
  const pool = rec.poolSize !== undefined ? ` pool ${rec.poolUsed}/${rec.poolSize}${rec.dryAt !== undefined ? ` DRY at ${rec.dryAt.toFixed(1)} s` : ''}` : '';
  const mint = rec.mint ? ` (minted ${rec.mint.made} in ${rec.mint.seconds.toFixed(1)} s${rec.mint.stoppedBy === 'time' ? ', time box' : ''}${rec.mint.failures ? `, ${rec.mint.failures} mint requests failed with 5xx and were retried` : ''})` : '';
  const errs = rec.errors || rec.timeouts ? ` errors ${rec.errors} timeouts ${rec.timeouts}` : '';
  const writes = rec.dbWrites ? `, per request: ${rec.dbWrites.transactions.toFixed(2)} PostgreSQL transactions, ${rec.dbWrites.rows.toFixed(2)} rows written` : '';
  return `  [round ${rec.round}] ${scenario} @ ${target}: ${rec.rps.toFixed(0)} answered/s, p50 ${rec.p50} ms, p99 ${rec.p99} ms, RSS max ${(rec.rssMax / 2 ** 20).toFixed(0)} MB (by fifths of the run: ${rec.rssFifths.map((b) => (b / 2 ** 20).toFixed(0)).join('/')}), non-2xx ${rec.non2xx}${rec.warmupNon2xx ? ` (+${rec.warmupNon2xx} in warm-up)` : ''} [${codes}]${errs}${pool}${mint}, log ${(rec.logBytes / 2 ** 20).toFixed(1)} MB, CPU cores: server ${rec.cpu.server.toFixed(2)} (main thread ${rec.cpu.serverMainThread.toFixed(2)}), database ${rec.cpu.database.toFixed(2)}, load generator ${rec.cpu.loadGenerator.toFixed(2)}, other ${rec.cpu.foreign.toFixed(2)}${rec.cpuPerRequest ? `, server CPU per request ${rec.cpuPerRequest.all.toFixed(0)} µs (main thread ${rec.cpuPerRequest.main.toFixed(0)} µs)` : ''}${writes}${rec.serverErrors.count ? `\n      server logged ${rec.serverErrors.count} errors: ${rec.serverErrors.kinds.join('; ')}` : ''}`;
}

// Gatehouse -------------------------------------------------------------------------------------------

interface GatehouseTarget {
  target: Target;
  env: GatehouseEnv;
  setup: GatehouseSetup;
  /** Per user: an access token (refreshed each round: they live 15 minutes). */
  accessTokens: string[];
  /** The round whose prep minted `accessTokens` (undefined: none yet). */
  accessTokensRound?: number;
  /** Refresh-token request bodies minted but never taken by a run: still one-use, carried to the next round. */
  leftover: Partial<Record<ScenarioKey, string[]>>;
  cleanup(): Promise<void>;
}

/** A checkout to measure: this one, or the `--baseline` one with the node flags its own build starts with. */
interface Build {
  root: string;
  before: boolean;
  startArgs: readonly string[];
}

function buildCheckout(root: string): void {
  console.log(`building: npm run build (in ${root})`);
  const b = spawnSync('npm', ['run', 'build'], { cwd: root, encoding: 'utf8' });
  if (b.status !== 0) {
    console.error(b.stdout + b.stderr);
    throw new Error(`npm run build failed in ${root} (exit ${b.status}): the production build does not compile, so there is no server to measure`);
  }
  if (!existsSync(join(root, 'dist', 'src', 'server.js'))) throw new Error(`${root}/dist/src/server.js missing after the build`);
}

/** The baseline's own start flags (its dist/src/node-flags.js), so each build runs as its own Docker image would. */
async function baselineBuild(root: string): Promise<Build> {
  const flags = join(root, 'dist', 'src', 'node-flags.js');
  const startArgs = existsSync(flags) ? (((await import(flags)) as { SERVER_START_ARGS?: readonly string[] }).SERVER_START_ARGS ?? []) : [];
  return { root, before: true, startArgs };
}

let serverCounter = 0;
async function gatehouse(t: { target: string; env: GatehouseEnv }, role: string, cpuProfDir?: string): Promise<ServerProcess> {
  const name = `gatehouse-${t.target}-${++serverCounter}-${role}`;
  return track(startGatehouse(t.env, { port: await freePort(), logFile: logPath(workDir, name), name, cpuProfDir }));
}

async function prepareTarget(opts: Options, database: Database, build: Build): Promise<GatehouseTarget | undefined> {
  const target: Target = build.before ? `${database}-before` : database;
  let databaseUrl: string;
  let cleanup: () => Promise<void>;
  const dataDir = join(workDir, `data-${target}`);
  mkdirSync(dataDir, { recursive: true });
  if (database === 'sqlite') {
    databaseUrl = `sqlite:${join(dataDir, 'gatehouse.db')}`;
    cleanup = async () => {};
  } else {
    const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
    if (!adminUrl) {
      console.log('PostgreSQL skipped: set TEST_DATABASE_URL (or BENCH_DATABASE_URL), e.g. postgres://root@127.0.0.1:5432/test');
      return undefined;
    }
    ({ url: databaseUrl, drop: cleanup } = await scratchPostgresDatabase(adminUrl, 'gh_bench_http'));
    cleanups.add(cleanup);
    console.log(`PostgreSQL database ${name} (dropped at the end)`);
  }
  const t = { target, env: { root: build.root, startArgs: build.startArgs, databaseUrl, dataDir, workers: opts.workers } };
  const started = Date.now();
  const server = await gatehouse(t, 'setup');
  try {
    const setup = await setupGatehouse(server.url, opts.users);
    await sanityCheck(server.url, setup);
    console.log(`${target}: app ${setup.clientId}, ${setup.users.length} users registered and signed in (hosted login) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
    return { target, env: t.env, setup, accessTokens: [], leftover: {}, cleanup };
  } finally {
    await stop(server);
  }
}

/** PostgreSQL's counters of a database (pg_stat_database): transactions committed and rows written; undefined for SQLite. */
async function databaseStats(databaseUrl: string): Promise<{ transactions: number; rows: number } | undefined> {
  if (!databaseUrl.startsWith('postgres')) return undefined;
  const client = new pg.Client({ connectionString: databaseUrl });
  await client.connect();
  try {
    const { rows } = await client.query<{ transactions: string; rows: string }>(
      'select xact_commit as transactions, tup_inserted + tup_updated + tup_deleted as rows from pg_stat_database where datname = current_database()',
    );
    // The statistics of this very session (its connect and this read) count too: one transaction, no rows.
    return { transactions: Number(rows[0]!.transactions), rows: Number(rows[0]!.rows) };
  } finally {
    await client.end();
  }
}

/** One of each: a refresh without openid has no id_token, with openid has one, a used token fails. */
async function sanityCheck(url: string, setup: GatehouseSetup): Promise<void> {
  const user = setup.users[0]!;
  const plain = await exchangeCode(url, setup, await mintCode(url, setup, user, 'profile email'));
  const r1 = await refreshOnce(url, setup, plain.refresh_token);
  if (r1.id_token) throw new Error('refresh of a token without openid answered an id_token');
  const withId = await exchangeCode(url, setup, await mintCode(url, setup, user, 'openid profile email'));
  const r2 = await refreshOnce(url, setup, withId.refresh_token);
  if (!r2.id_token) throw new Error('refresh of an openid token answered no id_token');
}

const mintConcurrency = 32;

/** Attaches what a prep server logged as errors to the pools it minted (when minting saw server errors). */
function noteMintErrors(prep: ServerProcess, stats: Array<MintStats | undefined>): void {
  if (!stats.some((s) => s?.failures)) return;
  const { kinds } = loggedErrors(prep.logFile, 0, 4);
  if (kinds.length) console.log(`  the prep server logged: ${kinds.join('; ')}`);
  for (const s of stats) if (s?.failures) s.serverErrors = kinds;
}

type Pool = { items: string[]; stats: MintStats };

const mintLine = (s: MintStats) =>
  `${s.made} in ${s.seconds.toFixed(1)} s (${s.seconds > 0 ? (s.made / s.seconds).toFixed(0) : '–'}/s)${s.stoppedBy === 'time' ? ' [time box]' : ''}${s.failures ? ` — ${s.failures} server errors retried, first: ${s.firstFailure}` : ''}`;

/**
 * What a scenario's run on a Gatehouse target needs minted beforehand, by a prep server: the refresh
 * grants a pool of one-use refresh-token bodies (returned); the bearer reads and the burst an access
 * token per user, minted once a round (they live 15 minutes). Codes live 60 s, so the code scenario
 * mints its pool right before its run instead (runGatehouseScenario).
 */
async function prepareGatehouseScenario(opts: Options, t: GatehouseTarget, round: number, key: ScenarioKey): Promise<Pool | undefined> {
  const { setup } = t;
  const refreshScope = key === 'refresh' ? 'profile email' : key === 'refresh-id' ? 'openid profile email' : undefined;
  const needsAccessTokens = (key === 'profile' || key === 'burst') && t.accessTokensRound !== round;
  if (!refreshScope && !needsAccessTokens) return undefined;
  const prep = await gatehouse(t, `r${round}-prep-${key}`);
  let pool: Pool | undefined;
  try {
    if (refreshScope) {
      const n = poolTarget(opts, key, t.target);
      const carried = t.leftover[key] ?? [];
      process.stdout.write(`  ${key} pool on ${t.target}: target ${n}, ${carried.length} never used from the last round; minting ${Math.max(0, n - carried.length)} (${refreshScope})… `);
      const minted = await mintPool(Math.max(0, n - carried.length), opts.mintSeconds, mintConcurrency, setup.users, async (user) => {
        const tokens = await exchangeCode(prep.url, setup, await mintCode(prep.url, setup, user, refreshScope));
        return refreshBody(tokens.refresh_token);
      });
      pool = { items: [...carried, ...minted.items], stats: minted.stats };
      t.leftover[key] = [];
      console.log(mintLine(minted.stats));
    }
    if (needsAccessTokens) {
      const firstMint = t.accessTokensRound === undefined;
      t.accessTokens = await parallel(setup.users.length, 8, (i) => withRetry('access token', async () => {
        const user = setup.users[i]!;
        const tokens = await exchangeCode(prep.url, setup, await mintCode(prep.url, setup, user, 'openid profile email'));
        if (firstMint) {
          const res = await fetch(`${prep.url}/v1/profile/${user.id}`, {
            method: 'PUT',
            headers: { authorization: `Bearer ${tokens.access_token}`, 'x-client-id': setup.clientId, 'content-type': 'application/json' },
            body: JSON.stringify({ data: { theme: 'dark', favourites: [3, 14], n: i } }),
          });
          if (res.status !== 200) throw new Error(`PUT profile → ${res.status} ${await res.text()}`);
        }
        return tokens.access_token;
      }));
      t.accessTokensRound = round;
    }
  } finally {
    await stop(prep);
    noteMintErrors(prep, [pool?.stats]);
  }
  return pool;
}

/**
 * Seconds to mint codes for a run: they live 60 s, so every code must still be valid at the end of the
 * warm-up and the run (12 s of slack for start-ups). Undefined when that leaves under 5 s.
 */
function codeTimeBox(opts: Options): number | undefined {
  const box = Math.min(40, 60 - opts.warmup - opts.duration - 12);
  return box < 5 ? undefined : box;
}

/** `items` turned left by `by` places: [a, b, c] by 1 is [b, c, a]. */
function rotated<T>(items: readonly T[], by: number): T[] {
  const k = items.length ? by % items.length : 0;
  return [...items.slice(k), ...items.slice(0, k)];
}

/** One scenario's run on a Gatehouse target, on a fresh server; `pool` from prepareGatehouseScenario. */
async function runGatehouseScenario(opts: Options, t: GatehouseTarget, round: number, key: ScenarioKey, pool: Pool | undefined): Promise<void> {
  const { setup } = t;
  const tokenHeaders = { authorization: setup.basic, 'content-type': 'application/x-www-form-urlencoded' };

  const runOne = async (spec: JobSpec, mint?: MintStats) => {
    const cpuProfDir = opts.profile === key ? profileDir(opts, t.target) : undefined;
    const server = await gatehouse(t, `r${round}-${key}`, cpuProfDir);
    const statsBefore = await databaseStats(t.env.databaseUrl);
    let r: Awaited<ReturnType<typeof drive>>;
    try {
      r = await drive(opts, server, spec);
      // Bodies the run never took (it pops them in order) were never sent: still good for the next round.
      if ((key === 'refresh' || key === 'refresh-id') && spec.pool && r.result.poolUsed !== undefined) t.leftover[key] = spec.pool.slice(r.result.poolUsed);
      const rec = toRecord(round, r, mint);
      await stop(server);
      // A server's connections hand in their statistics when they close: read them after it stopped.
      const statsAfter = await databaseStats(t.env.databaseUrl);
      const answered = (r.result.warmup?.total ?? 0) + r.result.run.total;
      if (statsBefore && statsAfter && answered > 0) {
        rec.dbWrites = { transactions: (statsAfter.transactions - statsBefore.transactions) / answered, rows: (statsAfter.rows - statsBefore.rows) / answered };
      }
      record(key, t.target, rec);
      console.log(describe(key, t.target, rec));
    } finally {
      await stop(server);
    }
    // The profile is written when the server exits: note the measured run's window beside it.
    if (cpuProfDir && r.result.runStartUs !== undefined) {
      for (const f of readdirSync(cpuProfDir).filter((x) => x.endsWith('.cpuprofile'))) {
        const file = join(cpuProfDir, f);
        if (!existsSync(windowFileOf(file))) writeFileSync(windowFileOf(file), JSON.stringify({ fromUs: r.result.runStartUs, toUs: r.result.runEndUs, scenario: key, target: t.target }));
      }
    }
  };

  const profileSpec: JobSpec = {
    method: 'GET',
    path: `/v1/profile/${setup.users[0]!.id}`,
    headers: {},
    variants: setup.users.map((u, i) => ({ path: `/v1/profile/${u.id}`, headers: { authorization: `Bearer ${t.accessTokens[i]}`, 'x-client-id': setup.clientId } })),
  };
  const loginSpec: JobSpec = {
    method: 'POST',
    path: '/v1/auth/login',
    headers: { authorization: setup.basic, 'content-type': 'application/json' },
    variants: setup.users.map((u) => ({ body: JSON.stringify({ email: u.email, password: u.password, client_id: setup.clientId }) })),
  };

  switch (key) {
    case 'refresh':
    case 'refresh-id':
      return runOne({ method: 'POST', path: '/oauth/token', headers: tokenHeaders, pool: pool!.items }, pool!.stats);
    case 'profile':
      return runOne(profileSpec);
    case 'login':
      return runOne(loginSpec);
    case 'authorize':
      // A signed-in browser asking for a code (consent given): each answer is a 302 carrying a new code.
      return runOne({
        method: 'GET',
        path: '/oauth/authorize',
        okStatus: 302,
        headers: {},
        variants: setup.users.map((u) => ({ path: `/oauth/authorize?${authorizeQuery(setup.clientId, 'openid profile email')}`, headers: { cookie: u.cookie } })),
      });
    case 'healthz':
      return runOne({ method: 'GET', path: '/healthz', headers: {} });
    case 'burst': {
      const server = await gatehouse(t, `r${round}-burst`);
      try {
        recordBurst(t.target, await burstRun(opts, round, server, profileSpec, loginSpec));
      } finally {
        await stop(server);
      }
      return;
    }
    case 'code': {
      // Codes live 60 s: minted right before their run, within codeTimeBox.
      const box = codeTimeBox(opts);
      if (box === undefined) {
        console.log('  code scenario skipped: codes live 60 s, so it needs warm-up + duration ≤ 43 s');
        return;
      }
      const prep = await gatehouse(t, `r${round}-prep-code`);
      let codes: Pool | undefined;
      try {
        const n = poolTarget(opts, 'code', t.target);
        process.stdout.write(`  minting ${n} codes on ${t.target} (time box ${box} s)… `);
        codes = await mintPool(n, box, mintConcurrency, setup.users, async (user) => codeBody(await mintCode(prep.url, setup, user, 'openid profile email')));
        console.log(mintLine(codes.stats));
      } finally {
        await stop(prep);
        noteMintErrors(prep, [codes?.stats]);
      }
      return runOne({ method: 'POST', path: '/oauth/token', headers: tokenHeaders, pool: codes.items }, codes.stats);
    }
  }
}

/** Bearer reads at BURST's rate alone, then the same beside `login` (which runs at full connections). */
async function burstRun(opts: Options, round: number, server: ServerProcess, bearer: JobSpec, login: JobSpec): Promise<BurstRecord> {
  const paced: JobSpec = { ...bearer, ...BURST };
  const alone = await drive(opts, server, paced);
  const [burst, during] = await Promise.all([drive(opts, server, login), drive(opts, server, paced)]);
  // Both concurrent drives sample the same server's RSS; the login drive's covers the whole burst.
  return { round, alone: alone.result.run, during: during.result.run, login: burst.result.run, rssMax: Math.max(alone.rss.max, burst.rss.max) };
}

// References ------------------------------------------------------------------------------------------

async function startRef(kind: 'oidc-provider' | 'hello' | 'jose' | 'argon2' | 'jose+argon2', round: number): Promise<ServerProcess> {
  const port = await freePort();
  const name = `ref-${kind}-${++serverCounter}-r${round}`;
  const dataDir = join(workDir, 'data-ref');
  mkdirSync(dataDir, { recursive: true });
  const script = kind === 'oidc-provider' ? join(ROOT, 'bench', 'http', 'ref-oidc-provider.ts') : join(ROOT, 'bench', 'http', 'ref-fastify.ts');
  const args = kind === 'oidc-provider' ? ['--import', 'tsx', script, String(port)] : ['--import', 'tsx', script, kind, String(port), dataDir];
  return track(
    startServer({
      name,
      command: process.execPath,
      args,
      cwd: ROOT,
      port,
      logFile: logPath(workDir, name),
      readyPath: '/__bench/ready',
      env: { PATH: process.env.PATH, HOME: process.env.HOME, NODE_ENV: 'production' },
    }),
  );
}

/** The reference of each scenario: `oidc-provider` for the grants (its `/__bench/mint` kind), bare Fastify routes for the rest. */
const GRANT_REFS: Partial<Record<ScenarioKey, string>> = { refresh: 'refresh', 'refresh-id': 'refresh-openid', code: 'code' };
const FASTIFY_REFS: Partial<Record<ScenarioKey, 'jose' | 'argon2' | 'hello' | 'jose+argon2'>> = { profile: 'jose', login: 'argon2', healthz: 'hello', burst: 'jose+argon2' };

/** One scenario's run on its reference, on a fresh server. */
async function refScenario(opts: Options, round: number, key: ScenarioKey): Promise<void> {
  if (key === 'authorize') return; // no reference: oidc-provider's interactions are not comparable
  const grantKind = GRANT_REFS[key];
  if (grantKind) {
    if (key === 'code' && codeTimeBox(opts) === undefined) return; // as for Gatehouse: codes live 60 s
    const server = await startRef('oidc-provider', round);
    try {
      const setupInfo = (await (await fetch(`${server.url}/__bench/setup`)).json()) as { client: { id: string; secret: string; redirectUri: string }; pkce: { verifier: string } };
      const n = poolTarget(opts, key, 'ref');
      const started = Date.now();
      const items = (await (await fetch(`${server.url}/__bench/mint?kind=${grantKind}&n=${n}`, { method: 'POST' })).json()) as string[];
      const mint: MintStats = { made: items.length, seconds: (Date.now() - started) / 1000, stoppedBy: 'count' };
      const basic = `Basic ${Buffer.from(`${encodeURIComponent(setupInfo.client.id)}:${encodeURIComponent(setupInfo.client.secret)}`).toString('base64')}`;
      const pool =
        key === 'code'
          ? items.map((code) => new URLSearchParams({ grant_type: 'authorization_code', code, redirect_uri: setupInfo.client.redirectUri, code_verifier: setupInfo.pkce.verifier }).toString())
          : items.map((rt) => new URLSearchParams({ grant_type: 'refresh_token', refresh_token: rt }).toString());
      const headers = { authorization: basic, 'content-type': 'application/x-www-form-urlencoded' };
      // One item checks the setup (and is dropped from the pool): an id_token exactly when openid was granted.
      const probe = await fetch(`${server.url}/token`, { method: 'POST', headers, body: pool.shift() });
      const answer = (await probe.json()) as { access_token?: string; id_token?: string; error?: string };
      if (probe.status !== 200 || !answer.access_token || !!answer.id_token !== (key !== 'refresh')) {
        throw new Error(`oidc-provider ${key} probe: ${probe.status} ${JSON.stringify(answer).slice(0, 300)}`);
      }
      const r = await drive(opts, server, { method: 'POST', path: '/token', headers, pool });
      const rec = toRecord(round, r, mint);
      record(key, 'ref', rec);
      console.log(describe(key, 'ref', rec));
    } finally {
      await stop(server);
    }
    return;
  }
  const kind = FASTIFY_REFS[key]!;
  const server = await startRef(kind, round);
  try {
    const info = (await (await fetch(`${server.url}/__bench/setup`)).json()) as { tokens?: Array<{ userId: string; token: string }>; logins?: Array<{ email: string; password: string }> };
    const bearer: JobSpec = { method: 'GET', path: '/profile/x', headers: {}, variants: (info.tokens ?? []).map((u) => ({ path: `/profile/${u.userId}`, headers: { authorization: `Bearer ${u.token}` } })) };
    const login: JobSpec = { method: 'POST', path: '/login', headers: { 'content-type': 'application/json' }, variants: (info.logins ?? []).map((u) => ({ body: JSON.stringify({ email: u.email, password: u.password }) })) };
    if (key === 'burst') {
      recordBurst('ref', await burstRun(opts, round, server, bearer, login));
      return;
    }
    const spec: JobSpec = kind === 'jose' ? bearer : kind === 'argon2' ? login : { method: 'GET', path: '/hello', headers: {} };
    const rec = toRecord(round, await drive(opts, server, spec));
    record(key, 'ref', rec);
    console.log(describe(key, 'ref', rec));
  } finally {
    await stop(server);
  }
}

// Report ----------------------------------------------------------------------------------------------

const fmt = (n: number) => (Number.isFinite(n) ? Math.round(n).toLocaleString('en') : '–');
const times = (x: number) => (Number.isFinite(x) ? `${x.toFixed(2)}×` : '–');
const ratio = (a: number, b: number) => times(b > 0 ? a / b : NaN);

function stat(scenario: ScenarioKey, target: Target) {
  const runs = results.get(keyOf(scenario, target)) ?? [];
  // A run whose pool ran dry measured less than its full time under load: left out of the medians.
  const full = runs.filter((r) => r.dryAt === undefined);
  return {
    runs,
    rps: median(full.map((r) => r.rps)),
    p99: median(full.map((r) => r.p99)),
    rss: runs.length ? Math.max(...runs.map((r) => r.rssMax)) : NaN,
    non2xx: runs.reduce((s, r) => s + r.non2xx + r.warmupNon2xx, 0),
    dry: runs.filter((r) => r.dryAt !== undefined).length,
    errors: runs.reduce((s, r) => s + r.errors + r.timeouts, 0),
  };
}

/**
 * Gatehouse's req/s over the reference's: the median over rounds of each round's ratio (a round runs the
 * targets of a scenario back to back), leaving out rounds where either run's pool ran dry. A ratio of
 * the medians would pair runs made minutes apart, when the host may have sped up or slowed down.
 */
function pairedRatio(scenario: ScenarioKey, target: Target, against: Target = 'ref'): number {
  const full = (t: Target) => (results.get(keyOf(scenario, t)) ?? []).filter((r) => r.dryAt === undefined);
  const ours = new Map(full(target).map((r) => [r.round, r.rps]));
  return median(full(against).filter((r) => ours.has(r.round) && r.rps > 0).map((r) => ours.get(r.round)! / r.rps));
}

/** This build against the `--baseline` one, scenario by scenario (paired by round like the reference ratios). */
function beforeAfterTable(opts: Options): string {
  const lines = [
    `Before and after: this build against the baseline (${baselineSource}), measured in the same rounds.`,
    '',
    '| scenario | SQLite req/s before → after | SQLite after / before | PostgreSQL req/s before → after | PostgreSQL after / before | max RSS MB SQLite before → after |',
    '|---|---:|---:|---:|---:|---:|',
  ];
  for (const s of SCENARIOS.filter((x) => opts.scenarios.includes(x.key))) {
    const [a, ab, p, pb] = (['sqlite', 'sqlite-before', 'postgres', 'postgres-before'] as const).map((t) => stat(s.key, t));
    lines.push(
      `| ${s.label} | ${fmt(ab!.rps)} → ${fmt(a!.rps)} | ${times(pairedRatio(s.key, 'sqlite', 'sqlite-before'))} | ${fmt(pb!.rps)} → ${fmt(p!.rps)} | ${times(pairedRatio(s.key, 'postgres', 'postgres-before'))} | ${fmt(ab!.rss / 2 ** 20)} → ${fmt(a!.rss / 2 ** 20)} |`,
    );
  }
  if (opts.scenarios.includes('login')) {
    const p99 = (t: Target) => fmt(stat('login', t).p99);
    lines.push('', `Password login p99 (median of rounds), before → after: SQLite ${p99('sqlite-before')} → ${p99('sqlite')} ms, PostgreSQL ${p99('postgres-before')} → ${p99('postgres')} ms.`);
  }
  return lines.join('\n');
}

/** `--cpu`: the server's CPU µs per answered request, per scenario and Gatehouse target (medians of the rounds). */
function cpuTable(opts: Options): string {
  const targets = (['sqlite-before', 'sqlite', 'postgres-before', 'postgres'] as const).filter((t) => opts.scenarios.some((s) => results.get(keyOf(s, t))?.length));
  const cell = (key: ScenarioKey, t: Target) => {
    const runs = (results.get(keyOf(key, t)) ?? []).filter((r) => r.cpuPerRequest && r.dryAt === undefined);
    if (!runs.length) return { all: NaN, main: NaN };
    return { all: median(runs.map((r) => r.cpuPerRequest!.all)), main: median(runs.map((r) => r.cpuPerRequest!.main)) };
  };
  const ratio = (after: number, before: number) => (Number.isFinite(after / before) ? `${(after / before).toFixed(2)}×` : '–');
  const pairs = (['sqlite', 'postgres'] as const).filter((d) => targets.includes(d) && targets.includes(`${d}-before`));
  const lines = [
    'Server CPU per answered request, µs (all threads / main thread; median of the rounds):',
    '',
    `| scenario | ${targets.map((t) => TARGET_NAMES[t]).join(' | ')}${pairs.map((d) => ` | ${d} after / before`).join('')} |`,
    `|---|${targets.map(() => '---:').join('|')}${pairs.map(() => '|---:').join('')}|`,
  ];
  for (const s of SCENARIOS.filter((x) => opts.scenarios.includes(x.key))) {
    const cells = targets.map((t) => cell(s.key, t));
    const ratios = pairs.map((d) => ratio(cell(s.key, d).all, cell(s.key, `${d}-before`).all));
    lines.push(`| ${s.key} | ${cells.map((c) => `${fmt(c.all)} / ${fmt(c.main)}`).join(' | ')}${ratios.map((r) => ` | ${r}`).join('')} |`);
  }
  return lines.join('\n');
}

function mainTable(opts: Options): string {
  const lines = [
    '| scenario | Gatehouse SQLite req/s | Gatehouse PostgreSQL req/s | reference req/s | ratio SQLite / PostgreSQL (median of the rounds\' ratios) |',
    '|---|---:|---:|---|---|',
  ];
  for (const s of SCENARIOS.filter((x) => opts.scenarios.includes(x.key))) {
    const a = stat(s.key, 'sqlite');
    const b = stat(s.key, 'postgres');
    const r = stat(s.key, 'ref');
    lines.push(`| ${s.label} | ${fmt(a.rps)} | ${fmt(b.rps)} | ${s.ref} ${fmt(r.rps)} | ${times(pairedRatio(s.key, 'sqlite'))} / ${times(pairedRatio(s.key, 'postgres'))} |`);
  }
  if (opts.scenarios.includes('login')) {
    const a = stat('login', 'sqlite');
    const b = stat('login', 'postgres');
    const r = stat('login', 'ref');
    lines.push('', `Password login p99 latency (median of rounds): SQLite ${fmt(a.p99)} ms, PostgreSQL ${fmt(b.p99)} ms, reference ${fmt(r.p99)} ms.`);
  }
  return lines.join('\n');
}

/** Bearer-read latency alone and during a login burst, per target (medians of rounds). */
function burstTable(): string {
  const lines = [
    `Token checks during a login burst: bearer reads at ${BURST.rate}/s on ${BURST.connections} connections, alone and then beside the login load on the same server; the reference is bare Fastify with its jose + SELECT and argon2 verify routes in one process (medians of rounds; latency corrected for coordinated omission).`,
    '',
    `| target | bearer p50 / p99 ms alone | bearer p50 / p99 ms during logins | bearer p99 during / alone | bearer 2xx/s during (${BURST.rate}/s offered) | logins/s during | max RSS MB |`,
    '|---|---|---|---:|---:|---:|---:|',
  ];
  for (const target of TARGETS) {
    const runs = burstResults.get(target) ?? [];
    if (!runs.length) continue;
    const m = (f: (r: BurstRecord) => number) => median(runs.map(f));
    const aloneP99 = m((r) => r.alone.latency.p99);
    const duringP99 = m((r) => r.during.latency.p99);
    const failed = (x: LoadSummary) => x.non2xx + x.errors + x.timeouts;
    const unanswered = runs.reduce((n, r) => n + failed(r.alone) + failed(r.during), 0);
    lines.push(
      `| ${TARGET_NAMES[target]} | ${m((r) => r.alone.latency.p50)} / ${aloneP99} | ${m((r) => r.during.latency.p50)} / ${duringP99}${unanswered ? ` (${unanswered} non-2xx, errors or timeouts)` : ''} | ${ratio(duringP99, aloneP99)} | ${fmt(m((r) => r.during.rps))} | ${fmt(m((r) => r.login.rps))} | ${fmt(Math.max(...runs.map((r) => r.rssMax)) / 2 ** 20)} |`,
    );
  }
  return lines.join('\n');
}

/** The CPU cell of a target's row: medians of the rounds, the server's main thread in brackets. */
function cpuCell(runs: readonly RunRecord[]): string {
  const m = (k: keyof CpuShare) => median(runs.map((r) => r.cpu[k])).toFixed(2);
  return `${m('server')} (${m('serverMainThread')}) / ${m('database')} / ${m('loadGenerator')}`;
}

function detailTable(opts: Options): string {
  const lines = [
    '| scenario | target | 2xx req/s per round | p99 ms (median) | max RSS MB | non-2xx (all rounds, incl. warm-up) | pool used / size per round | log MB per run | CPU cores: server (its main thread) / db / load gen. (median) | other CPU, cores (max) |',
    '|---|---|---|---:|---:|---:|---|---:|---|---:|',
  ];
  for (const s of SCENARIOS.filter((x) => opts.scenarios.includes(x.key))) {
    for (const target of TARGETS) {
      const st = stat(s.key, target);
      if (!st.runs.length) continue;
      const codes: Record<string, number> = {};
      for (const r of st.runs) for (const [c, n] of Object.entries(r.statusCodes)) if (!c.startsWith('2') && !(s.key === 'authorize' && c === '302')) codes[c] = (codes[c] ?? 0) + n;
      const codeText = Object.keys(codes).length ? ` (${Object.entries(codes).map(([c, n]) => `${c}: ${n}`).join(', ')})` : '';
      const pools = st.runs.some((r) => r.poolSize !== undefined)
        ? st.runs.map((r) => `${fmt(r.poolUsed ?? 0)} / ${fmt(r.poolSize ?? 0)}${r.dryAt !== undefined ? ' **dry**' : ''}`).join('; ')
        : '–';
      const errs = st.errors ? `; ${st.errors} socket errors/timeouts` : '';
      const logged = st.runs.reduce((n, r) => n + r.serverErrors.count, 0);
      const loggedText = logged ? `; server logged ${logged} errors` : '';
      lines.push(
        `| ${s.key} | ${TARGET_NAMES[target]} | ${st.runs.map((r) => fmt(r.rps)).join(', ')} | ${fmt(st.p99)} | ${fmt(st.rss / 2 ** 20)} | ${st.non2xx}${codeText}${errs}${loggedText} | ${pools} | ${(median(st.runs.map((r) => r.logBytes)) / 2 ** 20).toFixed(1)} | ${cpuCell(st.runs)} | ${Math.max(...st.runs.map((r) => r.cpu.foreign)).toFixed(2)} |`,
      );
    }
  }
  return lines.join('\n');
}

function errorNotes(): string {
  const notes: string[] = [];
  for (const s of SCENARIOS) {
    for (const target of TARGETS) {
      const runs = results.get(keyOf(s.key, target)) ?? [];
      const kinds = new Map<string, number>();
      for (const r of runs) for (const k of r.serverErrors.kinds) {
        const m = /^(\d+)× (.*)$/s.exec(k);
        if (m) kinds.set(m[2]!, (kinds.get(m[2]!) ?? 0) + Number(m[1]));
      }
      if (kinds.size) notes.push(`- ${s.key} @ ${target}: ${[...kinds.entries()].map(([k, n]) => `${n}× ${k}`).join('; ')}`);
    }
  }
  return notes.length ? notes.join('\n') : '- none';
}

function mintNotes(): string {
  const notes: string[] = [];
  for (const s of SCENARIOS) {
    for (const target of TARGETS) {
      const mints = (results.get(keyOf(s.key, target)) ?? []).map((r) => r.mint).filter((m): m is MintStats => !!m);
      if (!mints.length) continue;
      const text = mints.map((m) => `${fmt(m.made)} in ${m.seconds.toFixed(1)} s${m.stoppedBy === 'time' ? ' (time box)' : ''}${m.failures ? `, ${m.failures} server errors retried` : ''}`).join('; ');
      const first = mints.find((m) => m.firstFailure)?.firstFailure;
      const logged = mints.find((m) => m.serverErrors?.length)?.serverErrors;
      notes.push(`- ${s.key} @ ${target}: ${text}${first ? ` — first error: ${first}` : ''}${logged ? ` (server log, first round with errors: ${logged.join('; ')})` : ''}`);
    }
  }
  return notes.join('\n');
}

function machine(): { text: string } {
  const cpu = cpus()[0]?.model ?? 'unknown CPU';
  let pgVersion = '';
  const sqliteVersion = (() => {
    try {
      const r = spawnSync(process.execPath, ['-e', "const D=require('better-sqlite3');const d=new D(':memory:');console.log(d.prepare('select sqlite_version() v').get().v)"], { cwd: ROOT, encoding: 'utf8' });
      return r.stdout.trim();
    } catch {
      return '?';
    }
  })();
  pgVersion = pgVersionText;
  return { text: `${cpus().length} cores (\`nproc\`: ${nproc()}), ${cpu}; Node ${process.version}; SQLite ${sqliteVersion} (better-sqlite3)${pgVersion ? `; ${pgVersion}` : ''}` };
}
let pgVersionText = '';
function nproc(): string {
  const r = spawnSync('nproc', { encoding: 'utf8' });
  return r.stdout.trim() || '?';
}

/** The measured source: HEAD's commit, and whether src/ or migrations/ had uncommitted changes (read-only git). */
function sourceVersion(root: string): string {
  const head = spawnSync('git', ['log', '-1', '--format=%h %s'], { cwd: root, encoding: 'utf8' });
  const dirty = spawnSync('git', ['status', '--porcelain', '--', 'src', 'migrations'], { cwd: root, encoding: 'utf8' });
  if (head.status !== 0) return 'unknown (no git)';
  const [sha, ...subject] = head.stdout.trim().split(' ');
  const text = subject.join(' ');
  return `commit ${sha} ("${text.length > 80 ? `${text.slice(0, 77)}…` : text}")${dirty.stdout.trim() ? ', with uncommitted changes in src/ or migrations/' : ''}`;
}
let measuredSource = '';
let baselineSource = '';

function disturbanceNote(): string {
  const runs = [...results.values()].flat();
  const disturbed = runs.filter((r) => r.cpu.foreign > 0.2).length;
  if (!disturbed) return '';
  const worst = Math.max(...runs.map((r) => r.cpu.foreign));
  return `\n**Disturbed:** ${disturbed} of ${runs.length} runs shared the machine with other work (over 0.2 cores of "other CPU", up to ${worst.toFixed(2)}); read the ratios with that in mind.\n`;
}

function writeResults(opts: Options, args: string[], minutes: number, load: string, table: string, details: string): void {
  const file = join(ROOT, 'bench', 'RESULTS.md');
  const now = new Date().toISOString().replace(/\.\d+Z$/, 'Z');
  const command = `${process.env.TEST_DATABASE_URL ? `TEST_DATABASE_URL=${process.env.TEST_DATABASE_URL} ` : ''}npm run bench -- http${args.length ? ` ${args.join(' ')}` : ''}`;
  const section = `## http — the hot paths over HTTP, against references in the same run

Command (from the repository root; builds first with \`npm run build\`; PostgreSQL gets a fresh database next
to the given URL, dropped afterwards):

\`\`\`
${command}
\`\`\`

Measured ${now} (${minutes.toFixed(0)} min) on ${measuredSource}; machine: ${machine().text}. Load average at start: ${load}.

Setup: the production build as the Docker image starts it (\`node ${SERVER_START_ARGS.join(' ')} dist/src/server.js\`, \`NODE_ENV=production\`, default settings except
\`IP_AUTH_PER_MINUTE\` raised and a fixed \`SECRET_KEY\`/\`ADMIN_TOKEN\`; logs at the default level to a file),
on a fresh SQLite file and a fresh PostgreSQL database. autocannon in its own process, ${opts.connections}
connections, ${opts.warmup} s warm-up, a pause for the requests it left in flight (autocannon drops its
sockets at the end of a run, and the server finishes them), then ${opts.duration} s measured, ${opts.rounds} rounds, a fresh server
process for every run; the median of the rounds is quoted (req/s = 2xx answers per second). Within a round
the targets of one scenario run back to back (their pools minted first; the order turns by one each round), and a ratio is the median of the
rounds' ratios, each comparing runs made within a minute or two of each other. One confidential
app (client_secret_basic), ${opts.users} users; one-use codes and refresh tokens come from pools minted
before each run through the server's own flows (hosted sign-in once per user, then \`/oauth/authorize\` and
\`/oauth/token\`), never sent twice. References, each in its own process with \`NODE_ENV=production\`:
\`oidc-provider\` ${providerVersion()} (its memory adapter over a larger LRU, ES256 JWT access tokens via a
default resource, RS256 ID tokens, rotation on, PKCE, client_secret_basic; pools minted through its models),
and bare Fastify routes (hello; jose ES256 verify + one better-sqlite3 SELECT by primary key; argon2 \`verify\`
with Gatehouse's implementation (\`@node-rs/argon2\`) and \`ARGON2_OPTIONS\`; for the login burst, the last two in one process).

${table}
${disturbanceNote()}
Per target (all rounds). CPU columns are average cores over the load generator's life (its start-up,
warm-up and run): the server process (in brackets its main thread, the event loop; the rest is its
thread pool, worker threads and garbage collector), PostgreSQL's processes, autocannon, and everything
else on the machine ("other": work that was not part of the run; near 0 for an undisturbed run).

${details}

Errors the servers logged during the runs (warm-up included):

${errorNotes()}

Pool minting (before each run, not timed):

${mintNotes()}
`;
  let text = readFileSync(file, 'utf8');
  const start = text.indexOf('\n## http — ');
  if (start >= 0) {
    const next = text.indexOf('\n## ', start + 1);
    text = text.slice(0, start + 1) + section + (next >= 0 ? text.slice(next) : '');
  } else {
    text = text.trimEnd() + '\n\n' + section;
  }
  writeFileSync(file, text);
  console.log(`\nwrote the "http" section of ${file}`);
}

function providerVersion(): string {
  try {
    return JSON.parse(readFileSync(join(ROOT, 'node_modules', 'oidc-provider', 'package.json'), 'utf8')).version as string;
  } catch {
    return '';
  }
}

// Profile -------------------------------------------------------------------------------------------

let profileDirPath: string | undefined;
function profileDir(opts: Options, target: string): string {
  if (!profileDirPath) {
    const stamp = new Date().toISOString().replace(/[:.]/g, '-');
    profileDirPath = opts.profileDir ? resolve(opts.profileDir) : join(tmpdir(), 'gatehouse-cpuprof', `${stamp}-${opts.profile}-${target}`);
    mkdirSync(profileDirPath, { recursive: true });
  }
  return profileDirPath;
}

// Main ------------------------------------------------------------------------------------------------

export async function main(args: string[]): Promise<void> {
  if (args.includes('--help') || args.includes('-h')) {
    console.log(USAGE);
    return;
  }
  const opts = parseOptions(args);
  const startedAt = Date.now();
  const load = loadavg().map((l) => l.toFixed(2)).join(' ');
  if (opts.profile) {
    opts.rounds = 1;
    opts.refs = false;
    if (opts.only !== 'postgres') opts.only = 'sqlite';
  }
  console.log(`http bench: ${opts.rounds} round(s), ${opts.warmup} s warm-up + ${opts.duration} s runs, ${opts.connections} connections${opts.rate ? `, ${opts.rate} req/s offered` : ''}; node ${process.version}; load average ${load}`);

  const builds: Build[] = [{ root: ROOT, before: false, startArgs: SERVER_START_ARGS }];
  for (const root of [ROOT, ...(opts.baseline ? [opts.baseline] : [])]) {
    if (opts.build) buildCheckout(root);
    else if (!existsSync(join(root, 'dist', 'src', 'server.js'))) throw new Error(`${root}/dist/src/server.js missing: build it or drop --no-build`);
  }
  if (opts.baseline) builds.push(await baselineBuild(opts.baseline));
  measuredSource = sourceVersion(ROOT);
  baselineSource = opts.baseline ? sourceVersion(opts.baseline) : '';
  console.log(`measuring ${measuredSource}${baselineSource ? ` against the baseline ${baselineSource}` : ''}${opts.build ? '' : ' (as last built: --no-build)'}`);

  workDir = mkdtempSync(join(tmpdir(), 'gh-http-bench-'));
  const targets: GatehouseTarget[] = [];
  let interrupted = false;
  const onSignal = () => {
    interrupted = true;
    console.error('\ninterrupted: stopping servers, dropping the PostgreSQL database');
    for (const s of live) s.proc.kill('SIGKILL');
    void Promise.allSettled([...cleanups].map((c) => c())).then(() => {
      if (!opts.keep) rmSync(workDir, { recursive: true, force: true });
      process.exit(130);
    });
  };
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  try {
    if (process.env.TEST_DATABASE_URL || process.env.BENCH_DATABASE_URL) {
      try {
        const c = new pg.Client({ connectionString: process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL });
        await c.connect();
        const v = (await c.query('SHOW server_version')).rows[0].server_version as string;
        pgVersionText = `PostgreSQL ${v.split(' ')[0]} on the same host`;
        await c.end();
      } catch {
        // reported when the database is created
      }
    }
    const runGatehouse = opts.only === undefined || opts.only === 'sqlite' || opts.only === 'postgres';
    if (runGatehouse) {
      for (const build of builds) {
        for (const database of ['sqlite', 'postgres'] as const) {
          if (opts.only && opts.only !== database) continue;
          const t = await prepareTarget(opts, database, build);
          if (t) targets.push(t);
        }
      }
    }
    const runRefs = opts.refs && (opts.only === undefined || opts.only === 'ref');
    for (let round = 1; round <= opts.rounds; round++) {
      console.log(`\n== round ${round}/${opts.rounds}`);
      // Scenario by scenario, every target's pool minted first and then the targets run back to back:
      // this host's speed drifts within minutes, and a ratio must compare runs made under the same
      // conditions. The order turns by one each round, so no target always runs first or last.
      for (const key of opts.scenarios) {
        const pools: Array<Pool | undefined> = [];
        for (const t of targets) pools.push(await prepareGatehouseScenario(opts, t, round, key));
        const runs = [
          ...targets.map((t, i) => () => runGatehouseScenario(opts, t, round, key, pools[i])),
          ...(runRefs ? [() => refScenario(opts, round, key)] : []),
        ];
        for (const run of rotated(runs, round - 1)) await run();
      }
    }

    const minutes = (Date.now() - startedAt) / 60_000;
    const throughput = SCENARIOS.some((s) => opts.scenarios.includes(s.key));
    const table = [...(throughput ? [mainTable(opts)] : []), ...(throughput && opts.baseline ? [beforeAfterTable(opts)] : []), ...(burstResults.size ? [burstTable()] : [])].join('\n\n');
    if (opts.cpu && throughput) console.log(`\n${cpuTable(opts)}`);
    const details = throughput ? detailTable(opts) : '';
    console.log(`\n${table}\n\n${details}\n\nErrors the servers logged during the runs:\n${errorNotes()}\n\nPool minting:\n${mintNotes()}\n\nmachine: ${machine().text}; total ${minutes.toFixed(1)} min`);
    const dry = [...results.values()].flat().filter((r) => r.dryAt !== undefined).length;
    if (dry) console.log(`\nWARNING: ${dry} run(s) ran out of pool (marked dry, left out of the medians): raise --pool or --mint-seconds.`);
    const disturbed = [...results.values()].flat().filter((r) => r.cpu.foreign > 0.2).length;
    if (disturbed) console.log(`\nNOTE: ${disturbed} run(s) shared the machine with other work (over 0.2 cores of "other CPU"): see the last column.`);

    if (opts.profile) {
      const dir = profileDirPath!;
      const files = readdirSync(dir).filter((f) => f.endsWith('.cpuprofile'));
      console.log(`\nCPU profile(s) of the Gatehouse server (${opts.profile}) in ${dir}:`);
      for (const f of files) {
        console.log(`  ${join(dir, f)}\n`);
        console.log(formatSummary(summarizeProfile(join(dir, f)), 25));
      }
      console.log(`\nSummarise again with: npx tsx bench/http/profile-summary.ts ${join(dir, files[0] ?? '<file>.cpuprofile')} [--top N] [--all]`);
      console.log('(measured run only, from the .window.json beside it; --all includes start-up, warm-up and shutdown; the .cpuprofile also opens in Chrome DevTools or speedscope)');
    }

    // A full run measured every scenario on both databases and the references (the baseline is optional).
    const measured: Target[] = ['sqlite', 'postgres', 'ref', ...targets.map((t) => t.target)];
    const everything =
      SCENARIOS.every((sc) => measured.every((tg) => (results.get(keyOf(sc.key, tg))?.length ?? 0) >= opts.rounds)) &&
      measured.every((tg) => (burstResults.get(tg)?.length ?? 0) >= opts.rounds);
    const full = !opts.profile && !opts.rate && opts.duration >= 10 && opts.rounds >= 3 && everything && dry === 0;
    const write = opts.write ?? full;
    if (write) writeResults(opts, args, minutes, load, table, details);
    else console.log(`\nbench/RESULTS.md not written (${opts.write === false ? '--no-write' : 'not a full run; --write forces it'})`);
  } catch (error) {
    if (!interrupted) throw error;
  } finally {
    for (const s of [...live]) await stop(s).catch(() => {});
    for (const c of cleanups) await c().catch((e) => console.error(`cleanup failed: ${e}`));
    cleanups.clear();
    if (opts.keep) console.log(`kept ${workDir}`);
    else rmSync(workDir, { recursive: true, force: true });
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  }
}
