import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashSecret } from '../../src/shared/ids.js';
import type { App } from '../../src/storage/repos/apps.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { migrateToLatest } from '../../src/storage/migrator.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeApp } from '../helpers/factories.js';

// SQLite only. The disk fills up under concurrent registrations and refreshes (max_page_count on the
// server's own connection, which SQLite enforces as a full disk): every write answered 2xx is in the
// file afterwards, every one answered 503 left nothing, no request gets anything else, and once there
// is room again the process serves as before (docs/adr/0003-sqlite-group-commit.md).
describe('a full disk under concurrent writes (SQLite group commit)', () => {
  let dir: string;
  let storage: Storage;
  let t: TestApp;
  let client: App;
  const post = (url: string, payload: Record<string, unknown>) => t.app.inject({ method: 'POST', url, payload, headers: { 'x-forwarded-for': '10.0.0.1' } });
  const register = (email: string) => post('/v1/auth/register', { email, password: `passphrase for ${email}`, name: `User ${'n'.repeat(60)}`, client_id: client.id });
  const setMaxPages = (pages: number) => sql.raw(`pragma max_page_count = ${pages}`).execute(storage.db);

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gh-disk-full-'));
    storage = createStorage(`sqlite:${join(dir, 'gatehouse.db')}`);
    await migrateToLatest(storage);
    t = await buildTestApp({ storage, env: { IP_AUTH_PER_MINUTE: '100000' } });
    await t.app.mailer.stop();
    client = await makeApp(t.db, { redirectUris: ['https://app.example/cb'] });
  });
  afterAll(async () => {
    await t.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('keeps every acknowledged write, keeps none answered 503, and serves again once there is room', async () => {
    // Sessions to refresh while the disk fills, each refreshed along its chain of rotations.
    const tokens: string[] = [];
    for (let i = 0; i < 12; i++) {
      const res = await register(`before-${i}@example.com`);
      expect(res.statusCode).toBe(201);
      tokens.push(res.json().refresh_token);
    }

    const { rows } = await sql<{ page_count: number }>`pragma page_count`.execute(storage.db);
    await setMaxPages(rows[0]!.page_count + 40);
    const registrations: Array<{ email: string; status: number; code?: string }> = [];
    const refreshes: Array<{ presented: string; status: number; successor?: string; code?: string }> = [];
    try {
      for (let wave = 0; wave < 8; wave++) {
        await Promise.all([
          ...Array.from({ length: 6 }, async (_, i) => {
            const email = `wave-${wave}-${i}@example.com`;
            const res = await register(email);
            registrations.push({ email, status: res.statusCode, code: res.statusCode === 201 ? undefined : res.json().code });
          }),
          ...tokens.map(async (presented, i) => {
            // Both doors of a refresh grant, alternately.
            const res =
              i % 2 === 0
                ? await post('/v1/auth/refresh', { refresh_token: presented, client_id: client.id })
                : await t.app.inject({ method: 'POST', url: '/oauth/token', payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: presented, client_id: client.id }).toString(), headers: { 'content-type': 'application/x-www-form-urlencoded' } });
            const body = res.json();
            refreshes.push({ presented, status: res.statusCode, successor: body.refresh_token, code: body.code ?? body.error });
            if (res.statusCode === 200) tokens[i] = body.refresh_token;
          }),
        ]);
      }
    } finally {
      await setMaxPages(1_073_741_823);
    }

    // Only success or 503 (the catalogue's service_unavailable; OAuth's temporarily_unavailable).
    const failed = [...registrations, ...refreshes].filter((r) => r.status !== 200 && r.status !== 201);
    expect(failed.length).toBeGreaterThan(0);
    expect(registrations.filter((r) => r.status === 201).length + refreshes.filter((r) => r.status === 200).length).toBeGreaterThan(0);
    expect(new Set(failed.map((r) => `${r.status} ${r.code}`))).toEqual(new Set(failed.map((r) => (r.code === 'temporarily_unavailable' ? '503 temporarily_unavailable' : '503 service_unavailable'))));

    // Registrations: answered 201 ⇒ the account exists, signed in (a grant); answered 503 ⇒ no sign-in
    // was stored. (A registration is two transactions: the account, then its first sign-in. When only
    // the second fails, the account stays, as after any failed sign-in.)
    const users = new Set((await t.db.selectFrom('users').select('email').execute()).map((u) => u.email));
    const signedIn = new Set((await t.db.selectFrom('grants').innerJoin('users', 'users.id', 'grants.user_id').select('users.email').execute()).map((u) => u.email));
    expect(registrations.filter((r) => (r.status === 201) !== signedIn.has(r.email))).toEqual([]);
    expect(registrations.filter((r) => r.status === 201 && !users.has(r.email))).toEqual([]);
    // Refreshes: a token is consumed, its successor stored, exactly when one presentation of it was
    // answered 200 (one answered 503 left it as it was, and it was presented again in the next wave).
    for (const presented of new Set(refreshes.map((r) => r.presented))) {
      const won = refreshes.find((r) => r.presented === presented && r.status === 200);
      const row = await t.db.selectFrom('refresh_tokens').select(['consumed_at', 'successor_hash']).where('token_hash', '=', hashSecret(presented)).executeTakeFirstOrThrow();
      expect(row.successor_hash).toBe(won ? hashSecret(won.successor!) : null);
      if (won) expect(await t.db.selectFrom('refresh_tokens').select('token_hash').where('token_hash', '=', hashSecret(won.successor!)).executeTakeFirst()).toBeDefined();
    }

    // With room again: the same process registers and refreshes.
    expect((await register('after@example.com')).statusCode).toBe(201);
    for (const token of tokens) expect((await post('/v1/auth/refresh', { refresh_token: token, client_id: client.id })).statusCode).toBe(200);
  });
});
