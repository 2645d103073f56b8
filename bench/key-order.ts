import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import SQLite from 'better-sqlite3';
import { hashSecret, newId, newOrderedSecret, newSecret } from '../src/shared/ids.js';
import { createStorage } from '../src/storage/connect.js';
import { migrateToLatest } from '../src/storage/migrator.js';

/**
 * `npm run bench -- key-order [--tokens N] [--rotations N] [--rounds N]`
 *
 * What a SQLite commit writes per refresh, with refresh tokens keyed by their plain SHA-256 (random)
 * or by newOrderedSecret's time-ordered key (bench/RESULTS.md, finding 42). On a fresh file with the
 * real schema (migrations), WAL and `synchronous=FULL` as the server opens it: N live refresh tokens,
 * each of its own grant; then rotations in the order the tokens were minted (as the http bench's pools
 * use them, and as a steady stream of clients refreshing every few minutes does), each the rotation's
 * UPDATE of the presented token (with a sealed response of a real one's size) and INSERT of its
 * successor, in transactions of 1, 8, 16 and 32 rotations: the group commit's batches. Checkpoints are
 * off during the measurement, so the WAL's growth is what the commits wrote.
 */

function arg(args: string[], name: string, fallback: number): number {
  const i = args.indexOf(`--${name}`);
  return i >= 0 ? Number(args[i + 1]) : fallback;
}

type KeyLayout = 'plain' | 'ordered';
const mint = (layout: KeyLayout) => (layout === 'ordered' ? newOrderedSecret('rt') : newSecret('rt'));

/** A sealed token response's size in the rotation's UPDATE (access token, refresh token, sealed, base64url). */
const SEALED_RESPONSE = randomBytes(1024).toString('base64url');

async function measure(layout: KeyLayout, batch: number, tokens: number, rotations: number): Promise<{ walKiBPerRotation: number; msPerCommit: number }> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-key-order-'));
  const file = join(dir, 'bench.db');
  try {
    const storage = createStorage(`sqlite:${file}`);
    await migrateToLatest(storage);
    await storage.close();

    const db = new SQLite(file);
    db.pragma('journal_mode = WAL');
    db.pragma('synchronous = FULL');
    const now = Math.floor(Date.now() / 1000);
    db.prepare(`INSERT INTO users (id, email, email_verified, password_hash, name, status, created_at, updated_at) VALUES ('usr_bench', 'bench@example.com', 1, NULL, 'Bench', 'active', ?, ?)`).run(now, now);
    db.prepare(`INSERT INTO developers (id, email, name, api_key_hash, created_at) VALUES ('dev_bench', 'dev@example.com', 'Bench', 'x', ?)`).run(now);
    db.prepare(`INSERT INTO apps (id, developer_id, name, type, redirect_uris, created_at, updated_at) VALUES ('app_bench', 'dev_bench', 'Bench', 'public', '[]', ?, ?)`).run(now, now);
    const insertGrant = db.prepare(`INSERT INTO grants (id, app_id, user_id, scope, auth_time, created_at, expires_at) VALUES (?, 'app_bench', 'usr_bench', 'openid', ?, ?, ?)`);
    const insertToken = db.prepare(`INSERT INTO refresh_tokens (token_hash, grant_id, app_id, scope, created_at, expires_at) VALUES (?, ?, 'app_bench', 'openid', ?, ?)`);
    const rotate = db.prepare(`UPDATE refresh_tokens SET consumed_at = ?, successor_response = ?, successor_hash = ? WHERE token_hash = ? AND consumed_at IS NULL`);
    const live: { key: string; grantId: string }[] = [];
    db.transaction(() => {
      for (let i = 0; i < tokens; i++) {
        const grantId = newId('grt');
        insertGrant.run(grantId, now, now, now + 86_400);
        const key = hashSecret(mint(layout));
        insertToken.run(key, grantId, now, now + 86_400);
        live.push({ key, grantId });
      }
    })();
    db.pragma('wal_checkpoint(TRUNCATE)');
    db.pragma('wal_autocheckpoint = 0');

    const started = process.hrtime.bigint();
    for (let i = 0; i < rotations; i += batch) {
      db.transaction(() => {
        for (const { key, grantId } of live.slice(i, i + batch)) {
          const successor = hashSecret(mint(layout));
          if (rotate.run(now, SEALED_RESPONSE, successor, key).changes !== 1) throw new Error('rotation lost');
          insertToken.run(successor, grantId, now, now + 86_400);
        }
      })();
    }
    const ms = Number(process.hrtime.bigint() - started) / 1e6;
    const wal = statSync(`${file}-wal`).size;
    db.close();
    return { walKiBPerRotation: wal / rotations / 1024, msPerCommit: ms / Math.ceil(rotations / batch) };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;

export async function main(args: string[]): Promise<void> {
  const tokens = arg(args, 'tokens', 60_000);
  const rotations = arg(args, 'rotations', 6_000);
  const rounds = arg(args, 'rounds', 3);
  console.log(`${tokens} live refresh tokens, ${rotations} rotations, median of ${rounds} rounds (layouts alternating)`);
  console.log('| rotations per commit | WAL KiB per rotation: plain / ordered | ms per commit: plain / ordered |');
  console.log('|---:|---|---|');
  for (const batch of [1, 8, 16, 32]) {
    const runs: Record<KeyLayout, { walKiBPerRotation: number; msPerCommit: number }[]> = { plain: [], ordered: [] };
    for (let round = 0; round < rounds; round++) {
      for (const layout of ['plain', 'ordered'] as const) runs[layout].push(await measure(layout, batch, tokens, rotations));
    }
    const wal = (layout: KeyLayout) => median(runs[layout].map((r) => r.walKiBPerRotation)).toFixed(1);
    const ms = (layout: KeyLayout) => median(runs[layout].map((r) => r.msPerCommit)).toFixed(2);
    console.log(`| ${batch} | ${wal('plain')} / ${wal('ordered')} | ${ms('plain')} / ${ms('ordered')} |`);
  }
}
