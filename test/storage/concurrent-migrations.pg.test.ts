import { describe, expect, it } from 'vitest';
import { createStorage } from '../../src/storage/connect.js';
import { TEST_SECRET_KEY } from '../helpers/app.js';
import { childEnv, freshDatabaseUrl, runCli } from '../helpers/processes.js';

// PostgreSQL only (`*.pg.test.ts` runs in the postgres project): migrations run under an advisory lock,
// so instances starting together against one database all come up and each migration applies once.
describe('two processes migrating one PostgreSQL database at once', { timeout: 120_000 }, () => {
  it('both succeed, and each migration is applied exactly once', async () => {
    const database = await freshDatabaseUrl();
    const env = childEnv({ DATABASE_URL: database.url, DATA_DIR: database.dataDir, SECRET_KEY: TEST_SECRET_KEY });
    try {
      const [a, b] = await Promise.all([runCli(['migrate', '--json'], env), runCli(['migrate', '--json'], env)]);
      expect([a.code, b.code], `${a.stderr}\n${b.stderr}`).toEqual([0, 0]);
      // One of them applied everything, the other found nothing left to do.
      const applied = [JSON.parse(a.stdout).applied.length, JSON.parse(b.stdout).applied.length].sort();
      expect(applied[0]).toBe(0);
      expect(applied[1]).toBeGreaterThan(0);
      const check = createStorage(database.url);
      try {
        const rows = await check.db.selectFrom('kysely_migration' as never).select('name' as never).execute();
        const names = rows.map((r) => (r as { name: string }).name);
        expect(names.length).toBe(applied[1]);
        expect(new Set(names).size).toBe(names.length);
      } finally {
        await check.close();
      }
    } finally {
      await database.drop();
    }
  });
});
