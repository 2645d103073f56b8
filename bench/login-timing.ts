import { buildApp } from '../src/app.js';
import { parseConfig, type ResolvedConfig } from '../src/config.js';
import { createStorage } from '../src/storage/connect.js';
import { migrateToLatest } from '../src/storage/migrator.js';

/**
 * `npm run bench -- login-timing [--samples N]` (a benchmark rather than a timed test: timing on a shared machine is not a pass/fail signal):
 * POST /v1/auth/login through the real route for an unknown email and for a known email with a wrong
 * password, interleaved after a warm-up, and reports both medians, their difference and a two-sided
 * Mann-Whitney U test. The unknown-email path runs one dummy argon2 verify, so the two should not differ.
 * Lockout and per-IP limits are raised for the run (they treat known and unknown emails alike anyway).
 */

const SECRET = 'bench-secret-key-0123456789abcdef-0123456789';

function arg(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

const median = (xs: number[]): number => {
  const s = [...xs].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
};

/** Two-sided p-value of the Mann-Whitney U test (normal approximation with tie correction). */
export function mannWhitneyP(a: number[], b: number[]): number {
  const all = [...a.map((v) => ({ v, g: 0 })), ...b.map((v) => ({ v, g: 1 }))].sort((x, y) => x.v - y.v);
  const ranks = new Array<number>(all.length);
  let tieTerm = 0;
  for (let i = 0; i < all.length; ) {
    let j = i;
    while (j + 1 < all.length && all[j + 1]!.v === all[i]!.v) j++;
    const rank = (i + j) / 2 + 1;
    for (let k = i; k <= j; k++) ranks[k] = rank;
    const t = j - i + 1;
    tieTerm += t ** 3 - t;
    i = j + 1;
  }
  const n1 = a.length;
  const n2 = b.length;
  const r1 = all.reduce((sum, x, i) => (x.g === 0 ? sum + ranks[i]! : sum), 0);
  const u = r1 - (n1 * (n1 + 1)) / 2;
  const n = n1 + n2;
  const sigma = Math.sqrt(((n1 * n2) / 12) * (n + 1 - tieTerm / (n * (n - 1))));
  const z = (u - (n1 * n2) / 2) / sigma;
  return 2 * (1 - normalCdf(Math.abs(z)));
}

function normalCdf(z: number): number {
  // Abramowitz-Stegun 7.1.26 approximation of erf.
  const t = 1 / (1 + 0.3275911 * (z / Math.SQRT2));
  const poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))));
  return 0.5 * (1 + (1 - poly * Math.exp(-(z * z) / 2)));
}

export async function main(args: string[]): Promise<void> {
  const samples = Number(arg(args, 'samples') ?? 500);
  const storage = createStorage('sqlite::memory:');
  await migrateToLatest(storage);
  const config = parseConfig({
    NODE_ENV: 'test',
    SECRET_KEY: SECRET,
    LOG_LEVEL: 'warn',
    LOGIN_MAX_FAILURES: '1000000',
    IP_AUTH_PER_MINUTE: '1000000',
  }) as ResolvedConfig;
  const app = await buildApp(config, { storage, logStream: false });
  await app.ready();
  const { makeApp, makeUser } = await import('../test/helpers/factories.js');
  const client = await makeApp(app.db);
  const alice = await makeUser(app, { email: 'alice@example.com' });

  const attempt = async (email: string): Promise<number> => {
    const t0 = process.hrtime.bigint();
    const res = await app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password: 'not the password at all', client_id: client.id } });
    const ms = Number(process.hrtime.bigint() - t0) / 1e6;
    if (res.statusCode !== 401) throw new Error(`expected 401, got ${res.statusCode} ${res.body}`);
    return ms;
  };

  for (let i = 0; i < 30; i++) {
    await attempt('carol@example.com');
    await attempt(alice.email);
  }
  const unknown: number[] = [];
  const known: number[] = [];
  for (let i = 0; i < samples; i++) {
    // Interleaved, with the order alternating so drift affects both classes alike.
    if (i % 2) {
      unknown.push(await attempt('carol@example.com'));
      known.push(await attempt(alice.email));
    } else {
      known.push(await attempt(alice.email));
      unknown.push(await attempt('carol@example.com'));
    }
  }
  const mu = median(unknown);
  const mk = median(known);
  console.log(`node ${process.version}, ${samples} interleaved samples per class (after 30 warm-up pairs), SQLite in memory`);
  console.log('| class | median ms |\n|---|---:|');
  console.log(`| unknown email (carol) | ${mu.toFixed(2)} |`);
  console.log(`| known email, wrong password (alice) | ${mk.toFixed(2)} |`);
  console.log(`median difference: ${(mu - mk).toFixed(2)} ms; Mann-Whitney U two-sided p = ${mannWhitneyP(unknown, known).toFixed(3)}`);
  await app.close();
  await storage.close();
}
