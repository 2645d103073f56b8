import { existsSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import SQLite from 'better-sqlite3';
import { hashSecret, newOrderedSecret } from '../src/shared/ids.js';
import { SERVER_START_ARGS } from '../src/node-flags.js';
import { codeBody, exchangeCode, type GatehouseSetup, logPath, mintCode, refreshBody, setupGatehouse, startGatehouse } from './http/gatehouse.js';
import { freePort, runLoadGenerator, type ServerProcess } from './http/proc.js';

/**
 * `npm run bench -- cpu [options]`: the server's CPU time per request of the grants (refresh, refresh-id,
 * code) on SQLite, for this build and, with `--baseline DIR`, another one, side by side. It depends less
 * than req/s on what else the machine runs, but not nothing: a run that answers fewer requests shares
 * fewer commits (group commit) and spends more of its time warming up, so compare runs that answered
 * similar numbers (each line says how many).
 *
 * Each build's production server (dist/, its own node flags) gets a fresh SQLite file, an app and users
 * (bench/http/gatehouse.ts). One refresh token per scope and one code are minted through the server's
 * own flows; the pools are copies of those rows under new secrets, written into the file while the
 * server is stopped (minting thousands through the hosted flow takes minutes on a busy machine, and a
 * copy is the same row but for its key). Then a fresh server process answers a warm-up and a measured
 * run (bench/http/load.ts, autocannon), and the CPU its threads ran over the measured run is read from
 * /proc (schedstat): µs per answered request, all threads and the main thread. Rounds alternate the builds.
 */

const USAGE = `npm run bench -- cpu [options]
  --baseline DIR     also measure the Gatehouse checkout in DIR (built: dist/src/server.js), side by side
  --rounds N         rounds, each with fresh servers for every build and scenario (default 3); medians quoted
  --duration S       seconds of each measured run (default 8)
  --warmup S         seconds of warm-up before it, same pool, not counted (default 4)
  --connections N    autocannon connections (default 16)
  --pool N           rows in each pool (default 30000)
  --scenarios a,b    subset of refresh, refresh-id, code (default all)
  --profile DIR      run the measured servers under \`node --cpu-prof\`, profiles in DIR (summarise one with
                     \`npx tsx bench/http/profile-summary.ts FILE --all\`)`;

type Scenario = 'refresh' | 'refresh-id' | 'code';
const SCOPES: Record<Scenario, string> = { refresh: 'profile email', 'refresh-id': 'openid profile email', code: 'openid profile email' };

interface Build {
  name: string;
  root: string;
  startArgs: readonly string[];
}

interface Prepared {
  build: Build;
  dataDir: string;
  setup: GatehouseSetup;
  /** Per scenario: the row minted through the server, copied for the pool. */
  seeds: Record<Scenario, string>;
}

const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length ? (s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2) : NaN;
};

let workDir = '';
let profileDir: string | undefined;
const live = new Set<ServerProcess>();

async function server(p: { build: Build; dataDir: string }, role: string, profiled = false): Promise<ServerProcess> {
  const name = `${p.build.name}-${role}`;
  const cpuProfDir = profiled && profileDir ? join(profileDir, name) : undefined;
  const s = await startGatehouse(
    { root: p.build.root, startArgs: p.build.startArgs, databaseUrl: `sqlite:${join(p.dataDir, 'gatehouse.db')}`, dataDir: p.dataDir },
    { port: await freePort(), logFile: logPath(workDir, name), name, cpuProfDir },
  );
  live.add(s);
  return s;
}

async function stop(s: ServerProcess): Promise<void> {
  await s.stop();
  live.delete(s);
}

async function prepare(build: Build): Promise<Prepared> {
  const dataDir = join(workDir, build.name);
  mkdirSync(dataDir, { recursive: true });
  const s = await server({ build, dataDir }, 'setup');
  try {
    const setup = await setupGatehouse(s.url, 2);
    const user = setup.users[0]!;
    const refreshSeed = async (scope: string) => hashSecret((await exchangeCode(s.url, setup, await mintCode(s.url, setup, user, scope))).refresh_token);
    const seeds = {
      refresh: await refreshSeed(SCOPES.refresh),
      'refresh-id': await refreshSeed(SCOPES['refresh-id']),
      code: hashSecret(await mintCode(s.url, setup, user, SCOPES.code)),
    };
    return { build, dataDir, setup, seeds };
  } finally {
    await stop(s);
  }
}

/**
 * `count` copies of the seed row of `scenario` under new secrets (the table's other columns as they are,
 * whatever the build's schema has), returned as request bodies. A code's copies expire in an hour.
 */
function fillPool(p: Prepared, scenario: Scenario, count: number): string[] {
  const db = new SQLite(join(p.dataDir, 'gatehouse.db'));
  try {
    const [table, key, prefix] = scenario === 'code' ? ['authorization_codes', 'code_hash', 'ac'] : ['refresh_tokens', 'token_hash', 'rt'];
    const columns = (db.prepare(`select name from pragma_table_info('${table}')`).all() as Array<{ name: string }>).map((c) => c.name).filter((c) => c !== key);
    const copied = columns.map((c) => (c === 'expires_at' && scenario === 'code' ? 'expires_at + 3600' : c)).join(', ');
    const insert = db.prepare(`insert into ${table} (${key}, ${columns.join(', ')}) select ?, ${copied} from ${table} where ${key} = ?`);
    const secrets: string[] = [];
    db.transaction(() => {
      for (let i = 0; i < count; i++) {
        const secret = newOrderedSecret(prefix);
        if (insert.run(hashSecret(secret), p.seeds[scenario]).changes !== 1) throw new Error(`no seed row in ${table}`);
        secrets.push(secret);
      }
    })();
    return secrets.map((s) => (scenario === 'code' ? codeBody(s) : refreshBody(s)));
  } finally {
    db.close();
  }
}

interface Measured {
  all: number;
  main: number;
  answered: number;
  non2xx: number;
}

async function measure(p: Prepared, scenario: Scenario, round: number, opts: { duration: number; warmup: number; connections: number; pool: number }): Promise<Measured> {
  const pool = fillPool(p, scenario, opts.pool);
  const poolFile = join(workDir, `pool-${p.build.name}-${scenario}-${round}.txt`);
  writeFileSync(poolFile, pool.join('\n') + '\n');
  const s = await server(p, `r${round}-${scenario}`, true);
  try {
    const result = await runLoadGenerator({
      url: s.url,
      serverPid: s.pid,
      connections: opts.connections,
      duration: opts.duration,
      warmup: opts.warmup,
      method: 'POST',
      path: '/oauth/token',
      headers: { authorization: p.setup.basic, 'content-type': 'application/x-www-form-urlencoded' },
      poolFile,
      resultFile: join(workDir, `result-${p.build.name}-${scenario}-${round}.json`),
    });
    const { run, serverCpu } = result;
    if (!serverCpu || run.total === 0) throw new Error(`${p.build.name} ${scenario}: no requests answered`);
    if (result.dryAt !== undefined) console.log(`  (pool ran dry at ${result.dryAt.toFixed(1)} s: the run is shorter, its CPU per request still counts)`);
    return { all: serverCpu.allNs / 1000 / run.total, main: serverCpu.mainNs / 1000 / run.total, answered: run.total, non2xx: run.non2xx };
  } finally {
    await stop(s);
    rmSync(poolFile, { force: true });
  }
}

export async function main(args: string[]): Promise<void> {
  if (args.includes('--help')) {
    console.log(USAGE);
    return;
  }
  const value = (name: string) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : undefined;
  };
  const num = (name: string, fallback: number) => (value(name) === undefined ? fallback : Number(value(name)));
  const opts = { duration: num('duration', 8), warmup: num('warmup', 4), connections: num('connections', 16), pool: num('pool', 30000) };
  const rounds = num('rounds', 3);
  profileDir = value('profile') ? resolve(value('profile')!) : undefined;
  const scenarios = (value('scenarios')?.split(',') ?? ['refresh', 'refresh-id', 'code']) as Scenario[];
  const builds: Build[] = [{ name: 'this', root: resolve('.'), startArgs: SERVER_START_ARGS }];
  const baseline = value('baseline');
  if (baseline) {
    const root = resolve(baseline);
    const flags = join(root, 'dist', 'src', 'node-flags.js');
    const startArgs = existsSync(flags) ? (((await import(flags)) as { SERVER_START_ARGS?: readonly string[] }).SERVER_START_ARGS ?? []) : [];
    builds.unshift({ name: 'baseline', root, startArgs });
  }
  for (const b of builds) if (!existsSync(join(b.root, 'dist', 'src', 'server.js'))) throw new Error(`${b.root}: no dist/src/server.js (npm run build there)`);

  workDir = mkdtempSync(join(tmpdir(), 'gh-cpu-bench-'));
  const results = new Map<string, Measured[]>();
  try {
    const prepared: Prepared[] = [];
    for (const b of builds) prepared.push(await prepare(b));
    for (let round = 1; round <= rounds; round++) {
      for (const scenario of scenarios) {
        // Alternate which build runs first, so neither always meets the machine in the same state.
        const order = round % 2 ? prepared : [...prepared].reverse();
        for (const p of order) {
          const m = await measure(p, scenario, round, opts);
          const k = `${scenario}|${p.build.name}`;
          results.set(k, [...(results.get(k) ?? []), m]);
          console.log(`  [round ${round}] ${scenario} @ ${p.build.name}: ${m.all.toFixed(0)} µs CPU per request (main thread ${m.main.toFixed(0)} µs), ${m.answered} answered, non-2xx ${m.non2xx}`);
        }
      }
    }
  } finally {
    for (const s of [...live]) await stop(s).catch(() => {});
    rmSync(workDir, { recursive: true, force: true });
  }
  const names = builds.map((b) => b.name);
  console.log(`\nServer CPU per request, µs: all threads / main thread (median of ${rounds} rounds), SQLite\n`);
  console.log(`| scenario | ${names.join(' | ')}${baseline ? ' | this / baseline (all threads) |' : ' |'}`);
  console.log(`|---|${names.map(() => '---:').join('|')}${baseline ? '|---:|' : '|'}`);
  for (const scenario of scenarios) {
    const cell = (n: string) => {
      const ms = results.get(`${scenario}|${n}`) ?? [];
      return { all: median(ms.map((m) => m.all)), main: median(ms.map((m) => m.main)) };
    };
    const cells = names.map(cell);
    const ratio = baseline ? ` | ${(cell('this').all / cell('baseline').all).toFixed(2)}× |` : ' |';
    console.log(`| ${scenario} | ${cells.map((c) => `${c.all.toFixed(0)} / ${c.main.toFixed(0)}`).join(' | ')}${ratio}`);
  }
}
