import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { createStorage, type Storage } from '../src/storage/connect.js';
import { migrateToLatest } from '../src/storage/migrator.js';
import { insertGrant, insertRefreshToken, liveGrantsWithProfile, rotateRefreshTokens } from '../src/storage/repos/grants.js';

/**
 * `npm run bench -- statements [--rounds N] [--calls N]`
 *
 * The storage layer's hot operations in process, without HTTP: what the decision records measure
 * (docs/adr/0001, 0003). Run it in two checkouts, one after the other, to compare builds.
 *   rotation      refresh-token rotations on a SQLite file (WAL, synchronous=FULL), 16 chains at once
 *   bearer read   the coalesced bearer read of PostgreSQL (liveGrantsWithProfile.many, 4 grants a
 *                 statement, 4 statements in flight); needs TEST_DATABASE_URL or BENCH_DATABASE_URL
 * Each prints, over `rounds` rounds of `calls` per lane after a warm-up, the best and median rate and
 * the process's CPU per operation (median): CPU is less disturbed than rates on a shared machine.
 */

const NOW = 1_800_000_000;

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

async function seed(storage: Storage, users: number): Promise<void> {
  const { db } = storage;
  await db.insertInto('developers').values({ id: 'dev_1', email: 'd@bench.test', name: 'd', api_key_hash: 'h', created_at: NOW }).execute();
  await db
    .insertInto('apps')
    .values({
      id: 'app_1', developer_id: 'dev_1', name: 'a', type: 'public', client_secret_hash: null, redirect_uris: '[]', allowed_origins: '[]',
      feature_auth: 1, feature_profile: 1, required_fields: '[]', mfa: 'optional', disabled: 0, created_at: NOW, updated_at: NOW,
      dpop_bound_access_tokens: 0, require_pushed_authorization_requests: 0, device_authorization_grant: 0,
    })
    .execute();
  for (let u = 0; u < users; u++) {
    await db.insertInto('users').values({ id: `usr_${u}`, email: `u${u}@bench.test`, email_verified: 1, status: 'active', created_at: NOW, updated_at: NOW }).execute();
    await insertGrant(db, { id: `grt_${u}`, app_id: 'app_1', user_id: `usr_${u}`, scope: 's', auth_time: NOW, amr: null, nonce: null, created_at: NOW, expires_at: NOW + 1e6, revoked_at: null, revoked_reason: null });
    await db.insertInto('profiles').values({ app_id: 'app_1', user_id: `usr_${u}`, data: '{"a":1}', version: 1, created_at: NOW, updated_at: NOW }).execute();
  }
}

/** Runs `round` (which does `operations` operations) `rounds` times after one warm-up round; prints the figures. */
async function measure(label: string, rounds: number, operations: number, round: () => Promise<void>): Promise<void> {
  await round();
  const results: Array<{ rate: number; cpuUs: number }> = [];
  for (let i = 0; i < rounds; i++) {
    const cpu = process.cpuUsage();
    const started = performance.now();
    await round();
    const used = process.cpuUsage(cpu);
    results.push({ rate: operations / ((performance.now() - started) / 1000), cpuUs: (used.user + used.system) / operations });
  }
  const median = (values: number[]) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
  console.log(
    `${label}: best ${Math.round(Math.max(...results.map((r) => r.rate)))}/s, median ${Math.round(median(results.map((r) => r.rate)))}/s, CPU ${median(results.map((r) => r.cpuUs)).toFixed(1)} µs each (median)`,
  );
}

async function rotations(rounds: number, calls: number): Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-bench-statements-'));
  const storage = createStorage(`sqlite:${join(dir, 'bench.db')}`);
  try {
    await migrateToLatest(storage);
    await seed(storage, 1);
    let serial = 0;
    const row = (hash: string) => ({ token_hash: hash, grant_id: 'grt_0', app_id: 'app_1', scope: 's', created_at: NOW, expires_at: NOW + 1e5 });
    const chains = Array.from({ length: 16 }, () => `t${String((serial += 1)).padStart(12, '0')}`);
    for (const hash of chains) await insertRefreshToken(storage.db, row(hash));
    const sealedResponse = 'x'.repeat(900);
    await measure('rotation (SQLite)', rounds, calls * chains.length, () =>
      Promise.all(
        chains.map(async (_, lane) => {
          for (let i = 0; i < calls; i++) {
            const next = `t${String((serial += 1)).padStart(12, '0')}`;
            if ((await rotateRefreshTokens(storage.db, 'sqlite', [{ tokenHash: chains[lane]!, at: NOW, sealedResponse, successor: row(next) }])).size !== 1) throw new Error('a rotation lost');
            chains[lane] = next;
          }
        }),
      ).then(() => undefined),
    );
  } finally {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

async function bearerReads(adminUrl: string, rounds: number, calls: number): Promise<void> {
  const name = `gh_bench_statements_${process.pid}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`create database ${name}`);
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const storage = createStorage(url.toString());
  try {
    await migrateToLatest(storage);
    await seed(storage, 16);
    await measure('bearer read (PostgreSQL, coalesced)', rounds, calls * 16, () =>
      Promise.all(
        Array.from({ length: 4 }, async (_, lane) => {
          const ids = [0, 1, 2, 3].map((k) => `grt_${lane * 4 + k}`);
          for (let i = 0; i < calls; i++) if ((await liveGrantsWithProfile.many(storage.db, ids, NOW)).size !== 4) throw new Error('a grant not live');
        }),
      ).then(() => undefined),
    );
  } finally {
    await storage.close();
    await admin.query(`drop database ${name} with (force)`);
    await admin.end();
  }
}

export async function main(args: string[]): Promise<void> {
  const rounds = arg(args, 'rounds', 5);
  const calls = arg(args, 'calls', 300);
  await rotations(rounds, calls);
  const adminUrl = process.env.BENCH_DATABASE_URL ?? process.env.TEST_DATABASE_URL;
  if (adminUrl) await bearerReads(adminUrl, rounds, calls);
  else console.log('bearer read (PostgreSQL) skipped: set TEST_DATABASE_URL (or BENCH_DATABASE_URL)');
}
