import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { KeyStore } from '../../src/plugins/keys.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { migrateToLatest } from '../../src/storage/migrator.js';
import { TEST_SECRET_KEY, TestClock } from '../helpers/app.js';
import { freshDatabaseUrl } from '../helpers/processes.js';

// Issue 11: instances started at once on an empty database used to create one active signing key per
// algorithm each. Now the first keys are single-winner, and every instance signs with the winner's.
describe('first signing keys created by instances starting at once', () => {
  const INSTANCES = 4;
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  let storages: Storage[];

  beforeAll(async () => {
    database = await freshDatabaseUrl();
    storages = Array.from({ length: INSTANCES }, () => createStorage(database.url));
    await migrateToLatest(storages[0]!);
  });
  afterAll(async () => {
    await Promise.all(storages.map((s) => s.close()));
    await database.drop();
  });

  it('leaves exactly one active key per algorithm, and every instance signs with it', async () => {
    const clock = new TestClock();
    const stores = storages.map((s) => new KeyStore(s.db, TEST_SECRET_KEY, clock, 'http://gatehouse.test', 3600));
    await Promise.all(stores.map((store) => store.init()));

    const active = await storages[0]!.db.selectFrom('signing_keys').select(['kid', 'alg']).where('retired_at', 'is', null).execute();
    expect(active.map((k) => k.alg).sort()).toEqual(['ES256', 'RS256']);

    const kidOf = (jwt: string) => JSON.parse(Buffer.from(jwt.split('.')[0]!, 'base64url').toString()).kid as string;
    for (const alg of ['ES256', 'RS256'] as const) {
      const kids = await Promise.all(stores.map(async (store) => kidOf(await store.sign({ sub: 'u' }, { alg, typ: 'JWT', expiresIn: 60 }))));
      expect(new Set(kids)).toEqual(new Set([active.find((k) => k.alg === alg)!.kid]));
    }
  });
});
