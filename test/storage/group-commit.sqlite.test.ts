import SQLite from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { NonBlockingSqliteDialect } from '../../src/storage/sqlite-driver.js';

// SQLite only. Group commit (src/storage/sqlite-driver.ts): concurrent writers share physical
// transactions, yet no caller sees its result before the COMMIT that made it durable, a failed
// transaction rolls back alone, and a read that ran inside an open batch waits for its commit too.
// "Durable" is checked from a second connection to the same file, which sees committed data only.
describe('SQLite group commit', () => {
  let dir: string;
  let storage: Storage;
  let observer: SQLite.Database;
  const db = () => storage.db.withTables<{ items: { id: number; owner: string } }>();

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gh-group-'));
    const file = join(dir, 'gatehouse.db');
    storage = createStorage(`sqlite:${file}`);
    await sql`create table items (id integer primary key, owner text not null unique)`.execute(storage.db);
    observer = new SQLite(file, { readonly: true });
  });
  afterAll(async () => {
    observer.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const committed = (owner: string) => observer.prepare('select count(*) as n from items where owner = ?').get(owner) as { n: number };
  /** Moves when the observer sees another connection's commit: read at every answer, it counts commits. */
  const dataVersion = () => (observer.prepare('pragma data_version').get() as { data_version: number }).data_version;

  it('answers each transaction only after it is committed, and commits them together', async () => {
    const commitsBefore = dataVersion();
    const seenAtAnswer = await Promise.all(
      Array.from({ length: 200 }, (_, i) =>
        db()
          .transaction()
          .execute(async (trx) => {
            await trx.insertInto('items').values({ id: i + 1, owner: `tx-${i}` }).execute();
            await trx.selectFrom('items').select('id').where('owner', '=', `tx-${i}`).executeTakeFirstOrThrow();
          })
          .then(() => committed(`tx-${i}`).n),
      ),
    );
    expect(seenAtAnswer).toEqual(seenAtAnswer.map(() => 1));
    // data_version moves once per commit seen from another connection: far fewer commits than transactions.
    const commits = dataVersion() - commitsBefore;
    expect(commits).toBeGreaterThan(0);
    expect(commits).toBeLessThan(200);
  });

  it('rolls a failed transaction back alone; the others in its batch commit', async () => {
    const results = await Promise.allSettled(
      ['ok-1', 'tx-0' /* duplicate owner: fails */, 'ok-2'].map((owner, i) =>
        db()
          .transaction()
          .execute(async (trx) => {
            await trx.insertInto('items').values({ id: 1000 + i, owner: `${owner}-pre` }).execute();
            await trx.insertInto('items').values({ id: 2000 + i, owner }).execute();
          }),
      ),
    );
    expect(results.map((r) => r.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect([committed('ok-1').n, committed('ok-1-pre').n, committed('ok-2').n]).toEqual([1, 1, 1]);
    expect(committed('tx-0-pre').n).toBe(0);
  });

  it('answers a single write, and a read that ran inside an open batch, only once that batch is committed', async () => {
    const writer = db()
      .transaction()
      .execute(async (trx) => {
        await trx.insertInto('items').values({ id: 3000, owner: 'batched' }).execute();
      });
    const single = db().insertInto('items').values({ id: 3001, owner: 'single' }).execute().then(() => committed('single').n);
    const reader = db().selectFrom('items').select('owner').where('owner', '=', 'batched').execute().then((rows) => [rows.length, committed('batched').n]);
    await writer;
    expect(await single).toBe(1);
    expect(await reader).toEqual([1, 1]);
  });

  it('takes a write that returns rows (INSERT … RETURNING) outside a transaction into the group commit, as any write', async () => {
    // better-sqlite3 calls such a statement a reader (it returns rows); run outside a batch it would
    // commit alone, with an fsync of its own on the main thread (every password sign-in's throttle slot did).
    const commitsBefore = dataVersion();
    const seenAtAnswer = await Promise.all(
      Array.from({ length: 50 }, (_, i) =>
        db()
          .insertInto('items')
          .values({ id: 5000 + i, owner: `returning-${i}` })
          .returning('id')
          .executeTakeFirstOrThrow()
          .then((row) => [row.id, committed(`returning-${i}`).n]),
      ),
    );
    expect(seenAtAnswer).toEqual(seenAtAnswer.map((_, i) => [5000 + i, 1]));
    // The observer reads at every answer: one commit each would move data_version ~50 times.
    const commits = dataVersion() - commitsBefore;
    expect(commits).toBeGreaterThan(0);
    expect(commits).toBeLessThanOrEqual(3);
  });

  it('keeps every answered transaction and none of the failed ones under a mixed concurrent load', async () => {
    // Transactions (some failing half-way), single writes and reads, all at once and in waves, so the
    // connection is handed over while others queue: each answered write must be committed, each
    // failed transaction must have left nothing.
    const outcomes: Array<{ owner: string; ok: boolean }> = [];
    for (let wave = 0; wave < 20; wave++) {
      await Promise.all(
        Array.from({ length: 30 }, async (_, i) => {
          const owner = `mix-${wave}-${i}`;
          const fail = i % 5 === 0;
          try {
            if (i % 3 === 0) {
              await db().insertInto('items').values({ id: 10_000 + wave * 100 + i, owner }).execute();
            } else {
              await db()
                .transaction()
                .execute(async (trx) => {
                  await trx.insertInto('items').values({ id: 10_000 + wave * 100 + i, owner }).execute();
                  // Work between statements that leaves the event loop (as signing a JWT does).
                  if (i % 2 === 0) await new Promise((resolve) => setImmediate(resolve));
                  await trx.selectFrom('items').select('id').where('owner', 'like', `mix-${wave}-%`).execute();
                  if (fail) await trx.insertInto('items').values({ id: 10_000 + wave * 100 + i, owner: `${owner}-dup` }).execute();
                });
            }
            outcomes.push({ owner, ok: committed(owner).n === 1 });
          } catch {
            outcomes.push({ owner, ok: committed(owner).n === 0 && fail });
          }
          await db().selectFrom('items').select('id').where('owner', '=', owner).execute();
        }),
      );
    }
    expect(outcomes.filter((o) => !o.ok)).toEqual([]);
    expect(outcomes).toHaveLength(600);
  });

  it('on a full disk, fails every member of a batch SQLite rolled back, runs none of them outside a transaction, and serves again once there is room', async () => {
    // SQLite answers SQLITE_FULL once the file would pass max_page_count, and may then roll the whole
    // shared transaction back by itself. Every answered write must be kept, every failed one absent.
    const pageCount = () => (sql.raw('pragma page_count').execute(storage.db) as Promise<{ rows: Array<{ page_count: number }> }>).then((r) => r.rows[0]!.page_count);
    await sql.raw(`pragma max_page_count = ${(await pageCount()) + 60}`).execute(storage.db);
    // Large rows run out of room first; small ones still fit after a rollback freed its pages.
    const size = (i: number) => (i % 4 === 0 ? 12_000 : 200);
    const outcomes: Array<{ owner: string; answered: boolean; error?: string }> = [];
    try {
      for (let wave = 0; wave < 10; wave++) {
        await Promise.all(
          Array.from({ length: 20 }, async (_, i) => {
            const owner = `full-${wave}-${i}-${'x'.repeat(size(i))}`;
            const id = 40_000 + wave * 100 + i;
            try {
              if (i % 3 !== 1) await db().insertInto('items').values({ id, owner }).execute();
              else
                await db()
                  .transaction()
                  .execute(async (trx) => {
                    await trx.insertInto('items').values({ id, owner }).execute();
                    await new Promise((resolve) => setImmediate(resolve));
                    await trx.selectFrom('items').select('id').where('id', '=', id).execute();
                  });
              outcomes.push({ owner, answered: true });
            } catch (error) {
              outcomes.push({ owner, answered: false, error: String((error as { code?: string }).code) });
            }
          }),
        );
      }
    } finally {
      await sql.raw('pragma max_page_count = 1073741823').execute(storage.db);
    }
    const answered = outcomes.filter((o) => o.answered);
    expect(answered.length).toBeGreaterThan(0);
    expect(outcomes.length - answered.length).toBeGreaterThan(0);
    expect(outcomes.filter((o) => committed(o.owner).n !== (o.answered ? 1 : 0)).map((o) => o.owner.slice(0, 16))).toEqual([]);
    // Each failure is the disk-full error itself (its own statement's, or the batch's it shared).
    expect(new Set(outcomes.filter((o) => !o.answered).map((o) => o.error))).toEqual(new Set(['SQLITE_FULL']));
    // With room again, writes commit as before.
    await db().transaction().execute((trx) => trx.insertInto('items').values({ id: 49_999, owner: 'after-full' }).execute());
    expect(committed('after-full').n).toBe(1);
  });

  it('hands the connection to the next in line at once: nobody else finds it free in between', async () => {
    const driver = new NonBlockingSqliteDialect({ database: new SQLite(':memory:'), busyBudgetMs: 1000 }).createDriver();
    const first = await driver.acquireConnection();
    const second = driver.acquireConnection();
    void driver.releaseConnection(first);
    // Asks in the very turn the connection is handed to `second`, before `second` has resumed.
    let thirdGranted = false;
    const third = driver.acquireConnection().then((connection) => {
      thirdGranted = true;
      return connection;
    });
    const secondLease = await second;
    await new Promise((resolve) => setImmediate(resolve));
    expect(thirdGranted).toBe(false);
    await driver.releaseConnection(secondLease);
    await driver.releaseConnection(await third);
    expect(thirdGranted).toBe(true);
    await driver.destroy();
  });
});
