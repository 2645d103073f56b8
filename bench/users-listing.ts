import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import { buildApp } from '../src/app.js';
import { parseConfig, type ResolvedConfig } from '../src/config.js';
import { hashSecret, newSecret } from '../src/shared/ids.js';
import { createStorage, type Storage } from '../src/storage/connect.js';
import { migrateToLatest } from '../src/storage/migrator.js';
import { insertDeveloper } from '../src/storage/repos/developers.js';

/**
 * `npm run bench -- users-listing [--users N] [--samples N] [--only sqlite|postgres]`
 *
 * Seeds N (default 1,000,000) users who all signed in to one app into a fresh database, then measures
 * GET /v1/dev/apps/{id}/users through the real route (app.inject: routing, developer-key auth,
 * validation, SQL, serialisation) for: a `q` search, status filters, and page 5,000.
 * SQLite: a new file in a temp dir. PostgreSQL: a new database next to BENCH_DATABASE_URL or
 * TEST_DATABASE_URL (skipped when neither is set), dropped afterwards.
 */

const SECRET = 'bench-secret-key-0123456789abcdef-0123456789';

function arg(args: string[], name: string): string | undefined {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? args[i + 1] : undefined;
}

async function seed(storage: Storage, users: number): Promise<{ appId: string; apiKey: string }> {
  const db = storage.db;
  const apiKey = newSecret('dk');
  const now = Math.floor(Date.now() / 1000);
  // Through the repository, so the key is stored where authentication looks (developer_api_keys).
  await insertDeveloper(db, { id: 'dev_bench', email: 'bench@example.com', name: 'Bench', createdAt: now }, hashSecret(apiKey));
  await db
    .insertInto('apps')
    .values({ id: 'app_bench', developer_id: 'dev_bench', name: 'Bench', type: 'public', client_secret_hash: null, redirect_uris: '["https://bench.example/cb"]', allowed_origins: '[]', feature_auth: 1, feature_profile: 1, required_fields: '[]', mfa: 'optional', disabled: 0, created_at: now, updated_at: now, dpop_bound_access_tokens: 0, require_pushed_authorization_requests: 0, device_authorization_grant: 0 })
    .execute();
  const base = now - users - 10;
  const chunk = 100_000;
  const started = Date.now();
  for (let from = 1; from <= users; from += chunk) {
    const to = Math.min(users, from + chunk - 1);
    // Every 200th user is disabled platform-wide; every 100th is blocked by the developer.
    if (storage.dialect === 'postgres') {
      await db.transaction().execute(async (trx) => {
      // Bulk seeding runs longer than the service's 15 s statement timeout.
      await sql`SET LOCAL statement_timeout = 0`.execute(trx);
      await sql`INSERT INTO users (id, email, email_verified, password_hash, name, status, created_at, updated_at)
        SELECT 'usr_b' || lpad(i::text, 8, '0'), 'user' || i || '@example' || (i % 100) || '.com', i % 2, NULL,
               'First' || i || ' Last' || (i % 1000), CASE WHEN i % 200 = 1 THEN 'disabled' ELSE 'active' END, CAST(${base} AS INTEGER) + i, CAST(${base} AS INTEGER) + i
        FROM generate_series(${from}::int, ${to}::int) AS i`.execute(trx);
      await sql`INSERT INTO app_users (app_id, user_id, status, created_at, last_login_at)
        SELECT 'app_bench', 'usr_b' || lpad(i::text, 8, '0'), CASE WHEN i % 100 = 0 THEN 'blocked' ELSE 'active' END, CAST(${base} AS INTEGER) + i, CAST(${base} AS INTEGER) + i
        FROM generate_series(${from}::int, ${to}::int) AS i`.execute(trx);
      });
    } else {
      await db.transaction().execute(async (trx) => {
        await sql`WITH RECURSIVE s(i) AS (SELECT CAST(${from} AS INTEGER) UNION ALL SELECT i + 1 FROM s WHERE i < CAST(${to} AS INTEGER))
          INSERT INTO users (id, email, email_verified, password_hash, name, status, created_at, updated_at)
          SELECT 'usr_b' || printf('%08d', i), 'user' || i || '@example' || (i % 100) || '.com', i % 2, NULL,
                 'First' || i || ' Last' || (i % 1000), CASE WHEN i % 200 = 1 THEN 'disabled' ELSE 'active' END, CAST(${base} AS INTEGER) + i, CAST(${base} AS INTEGER) + i
          FROM s`.execute(trx);
        await sql`WITH RECURSIVE s(i) AS (SELECT CAST(${from} AS INTEGER) UNION ALL SELECT i + 1 FROM s WHERE i < CAST(${to} AS INTEGER))
          INSERT INTO app_users (app_id, user_id, status, created_at, last_login_at)
          SELECT 'app_bench', 'usr_b' || printf('%08d', i), CASE WHEN i % 100 = 0 THEN 'blocked' ELSE 'active' END, CAST(${base} AS INTEGER) + i, CAST(${base} AS INTEGER) + i
          FROM s`.execute(trx);
      });
    }
    process.stdout.write(`\r  seeded ${to.toLocaleString('en')} users (${((Date.now() - started) / 1000).toFixed(0)} s)`);
  }
  process.stdout.write('\n');
  // What autovacuum / the query planner would have by now on a live system.
  if (storage.dialect === 'postgres') {
    await db.connection().execute(async (c) => {
      await sql`SET statement_timeout = 0`.execute(c);
      await sql`VACUUM ANALYZE`.execute(c);
      await sql`RESET statement_timeout`.execute(c);
    });
  }
  else await sql`ANALYZE`.execute(db);
  return { appId: 'app_bench', apiKey };
}

const percentile = (sorted: number[], p: number): number => sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)]!;

async function runOn(label: string, databaseUrl: string, storage: Storage, users: number, samples: number): Promise<void> {
  console.log(`\n== ${label}: seeding ${users.toLocaleString('en')} users in one app`);
  await migrateToLatest(storage);
  const { appId, apiKey } = await seed(storage, users);
  const config = parseConfig({ NODE_ENV: 'test', SECRET_KEY: SECRET, DATABASE_URL: databaseUrl, LOG_LEVEL: 'warn' }) as ResolvedConfig;
  const app = await buildApp(config, { storage, migrate: false, logStream: false });
  await app.ready();
  const rand = (lo: number, hi: number) => lo + Math.floor(Math.random() * (hi - lo + 1));
  const maxFive = Math.min(99_999, users);
  const cases: Array<{ name: string; query: () => string }> = [
    { name: 'q search (email/name substring, e.g. q=user12345)', query: () => `?q=user${rand(10_000, maxFive)}` },
    { name: 'q search on name (e.g. q=first54321 )', query: () => `?q=first${rand(10_000, maxFive)}%20` },
    { name: 'status=blocked', query: () => `?status=blocked&page=${rand(1, 5)}` },
    { name: 'status=disabled', query: () => '?status=disabled' },
    { name: 'status=active', query: () => '?status=active' },
    { name: 'page 5,000 (pageSize 20)', query: () => '?page=5000&pageSize=20' },
    { name: 'page 1 (no filter)', query: () => '' },
  ];
  const results: Array<{ name: string; p50: number; p95: number; total: number }> = [];
  for (const c of cases) {
    const times: number[] = [];
    let total = 0;
    for (let i = 0; i < samples + 20; i++) {
      const url = `/v1/dev/apps/${appId}/users${c.query()}`;
      const t0 = process.hrtime.bigint();
      const res = await app.inject({ method: 'GET', url, headers: { authorization: `Bearer ${apiKey}` } });
      const ms = Number(process.hrtime.bigint() - t0) / 1e6;
      if (res.statusCode !== 200) throw new Error(`${url} → ${res.statusCode} ${res.body}`);
      total = res.json().total;
      if (i >= 20) times.push(ms); // the first 20 warm up
    }
    times.sort((a, b) => a - b);
    results.push({ name: c.name, p50: percentile(times, 50), p95: percentile(times, 95), total });
  }
  console.log(`\n${label} (${samples} samples per case, ms):`);
  console.log('| case | p50 ms | p95 ms | total (last) |\n|---|---:|---:|---:|');
  for (const r of results) console.log(`| ${r.name} | ${r.p50.toFixed(1)} | ${r.p95.toFixed(1)} | ${r.total.toLocaleString('en')} |`);
  await app.close();
}

export async function main(args: string[]): Promise<void> {
  const users = Number(arg(args, 'users') ?? 1_000_000);
  const samples = Number(arg(args, 'samples') ?? 200);
  const only = arg(args, 'only');
  console.log(`node ${process.version}, ${users.toLocaleString('en')} users, ${samples} samples per case`);

  if (only !== 'postgres') {
    const dir = mkdtempSync(join(tmpdir(), 'gh-bench-'));
    const url = `sqlite:${join(dir, 'bench.db')}`;
    const storage = createStorage(url);
    try {
      await runOn('SQLite', url, storage, users, samples);
    } finally {
      await storage.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }

  const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
  if (only !== 'sqlite') {
    if (!adminUrl) {
      console.log('\nPostgreSQL skipped: set BENCH_DATABASE_URL or TEST_DATABASE_URL');
      return;
    }
    const name = `gh_bench_${randomBytes(4).toString('hex')}`;
    const admin = new pg.Client({ connectionString: adminUrl });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${name}`);
    const url = new URL(adminUrl);
    url.pathname = `/${name}`;
    const storage = createStorage(url.toString());
    try {
      await runOn('PostgreSQL', url.toString(), storage, users, samples);
    } finally {
      await storage.close();
      await admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await admin.end();
    }
  }
}
