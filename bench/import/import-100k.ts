/**
 * The user import at scale (docs/guides/migrating-users.md): N users with bcrypt hashes (default
 * 100,000) imported by `gatehouse user import FILE` into a fresh database, timed with its peak memory.
 * The goal: under 2 minutes and under 300 MB on SQLite and PostgreSQL on a 2-core machine.
 *
 *   npx tsx bench/import/import-100k.ts                       # SQLite (a temp file)
 *   npx tsx bench/import/import-100k.ts --dialect postgres    # a new database beside $DATABASE_ADMIN_URL
 *   npx tsx bench/import/import-100k.ts --users 20000
 *
 * Hashes are stored as given (re-hashed at each user's first sign-in), so the file reuses 64 real
 * bcrypt hashes (cost 10): making 100,000 distinct ones would take an hour and change nothing measured.
 */
import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { parseArgs } from 'node:util';
import bcrypt from 'bcryptjs';
import { scratchPostgresDatabase } from '../scratch-database.js';

const { values } = parseArgs({
  options: {
    dialect: { type: 'string', default: 'sqlite' },
    users: { type: 'string', default: '100000' },
  },
});
const count = Number(values.users);
const dir = mkdtempSync(join(tmpdir(), 'gatehouse-import-bench-'));
const file = join(dir, 'users.ndjson');

const hashes = Array.from({ length: 64 }, (_, i) => bcrypt.hashSync(`password-${i}`, 10));
const lines: string[] = [];
for (let i = 0; i < count; i++) {
  lines.push(
    JSON.stringify({
      email: `user${i}@bench.example`,
      email_verified: i % 3 !== 0,
      name: `Bench User ${i}`,
      external_id: `legacy-${i}`,
      created_at: new Date(Date.UTC(2020, 0, 1) + i * 60_000).toISOString(),
      password_hash: hashes[i % hashes.length],
    }),
  );
}
writeFileSync(file, `${lines.join('\n')}\n`);
lines.length = 0;

let databaseUrl: string;
let drop = async () => {};
if (values.dialect === 'postgres') {
  const adminUrl = process.env.DATABASE_ADMIN_URL ?? 'postgres://root@127.0.0.1:5432/test';
  ({ url: databaseUrl, drop } = await scratchPostgresDatabase(adminUrl, 'gh_bench_import'));
} else {
  databaseUrl = `sqlite:${join(dir, 'gatehouse.db')}`;
}

const env = { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? dir, NODE_ENV: 'production', LOG_LEVEL: 'warn', DATABASE_URL: databaseUrl, DATA_DIR: dir, SECRET_KEY: randomBytes(32).toString('hex'), BASE_URL: 'https://id.bench.example' };
try {
  const migrate = spawnSync(process.execPath, ['bin/gatehouse.cjs', 'migrate'], { env, encoding: 'utf8' });
  if (migrate.status !== 0) throw new Error(`migrate failed: ${migrate.stderr}`);
  // GNU time: wall seconds and the peak resident set (KiB) of the whole CLI process.
  const run = spawnSync('/usr/bin/time', ['-f', 'TIME %e %M', process.execPath, 'bin/gatehouse.cjs', 'user', 'import', file], { env, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
  const timing = /TIME ([0-9.]+) ([0-9]+)/.exec(run.stderr);
  if (run.status !== 0 || !timing) throw new Error(`import failed (${run.status}): ${run.stderr.slice(-2000)}`);
  const summary = run.stdout.split('\n')[0];
  console.log(`dialect=${values.dialect} users=${count} seconds=${timing[1]} peak_rss_mb=${(Number(timing[2]) / 1024).toFixed(0)}`);
  console.log(summary);
} finally {
  await drop();
  rmSync(dir, { recursive: true, force: true });
}
