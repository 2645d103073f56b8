import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { migrateToLatest } from '../../src/storage/migrator.js';
import { precompiled } from '../../src/storage/precompiled.js';
import { freshDatabaseUrl } from '../helpers/processes.js';

// Issue 13: hot statements are compiled once, with markers for their parameters; every call must bind
// its own values, keep the statement's own constants, and work inside transactions as outside.
describe('precompiled statements', () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  let storage: Storage;

  beforeAll(async () => {
    database = await freshDatabaseUrl();
    storage = createStorage(database.url);
    await migrateToLatest(storage);
  });
  afterAll(async () => {
    await storage.close();
    await database.drop();
  });

  const insert = precompiled((db, key: string, value: string, at: number) => db.insertInto('settings').values({ key, value, updated_at: at }));
  // A parameter used twice and a constant of the statement (the `'"x"'` compared to value).
  const select = precompiled((db, key: string, at: number) =>
    db
      .selectFrom('settings')
      .select(['key', 'value', 'updated_at'])
      .where((eb) => eb.or([eb('key', '=', key), eb('value', '=', '"x"')]))
      .where('updated_at', '>=', at)
      .where('updated_at', '<=', at),
  );

  it('binds each call its own values, keeps constants, inside and outside transactions', async () => {
    const { db } = storage;
    await insert(db, 'perf.a', '"a"', 10);
    await db.transaction().execute(async (trx) => {
      await insert(trx, 'perf.b', '"b"', 20);
      await insert(trx, 'perf.x', '"x"', 30);
    });
    expect((await select(db, 'perf.a', 10)).rows).toEqual([{ key: 'perf.a', value: '"a"', updated_at: 10 }]);
    expect((await db.transaction().execute((trx) => select(trx, 'perf.b', 20))).rows).toEqual([{ key: 'perf.b', value: '"b"', updated_at: 20 }]);
    expect((await select(db, 'nobody', 30)).rows).toEqual([{ key: 'perf.x', value: '"x"', updated_at: 30 }]);
    expect((await select(db, 'perf.a', 20)).rows).toEqual([]);
  });

  it('goes through the plugins of a Kysely that has them (a statement recorder sees it)', async () => {
    const seen: string[] = [];
    const recording = storage.db.withPlugin({
      transformQuery: (args) => (seen.push(args.node.kind), args.node),
      transformResult: async (args) => args.result,
    });
    expect((await select(recording, 'perf.a', 10)).rows).toEqual([{ key: 'perf.a', value: '"a"', updated_at: 10 }]);
    expect(seen).toEqual(['SelectQueryNode']);
  });

  it('refuses a statement that would drop one of its parameters', async () => {
    const dropping = precompiled((db, _key: string) => db.selectFrom('settings').select('key'));
    await expect(dropping(storage.db, 'perf.a')).rejects.toThrow(/drops a parameter/);
  });
});
