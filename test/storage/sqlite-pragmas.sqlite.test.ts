import { sql } from 'kysely';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage, type Storage } from '../../src/storage/connect.js';

// The settings a SQLite file is opened with: durable commits (docs/security/checklist.md#reliability-under-faults-and-concurrency) and a bounded page
// cache (docs/adr/0010-process-memory.md: better-sqlite3's compiled-in 16 MiB grew a process past 200 MB).
describe('a SQLite file database is opened', () => {
  let dir: string;
  let storage: Storage;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'gatehouse-pragmas-'));
    storage = createStorage(`sqlite:${join(dir, 'gatehouse.db')}`);
  });
  afterAll(async () => {
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const pragma = async (name: string) => {
    const { rows } = await sql.raw<Record<string, unknown>>(`pragma ${name}`).execute(storage.db);
    return rows[0]?.[name];
  };

  it.each([
    { name: 'journal_mode', value: 'wal' },
    { name: 'synchronous', value: 2 }, // FULL
    { name: 'foreign_keys', value: 1 },
    { name: 'cache_size', value: -2000 }, // 2 MiB, SQLite's own default (negative: KiB, not pages)
  ])('with $name = $value', async ({ name, value }) => {
    expect(await pragma(name)).toBe(value);
  });
});
