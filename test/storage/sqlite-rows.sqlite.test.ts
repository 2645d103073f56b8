import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createStorage, type Storage } from '../../src/storage/connect.js';

// SQLite only. The driver hands on better-sqlite3's own rows: every column of a wide row, a name
// selected twice, rows returned by a write and by a stream.
describe('SQLite rows', () => {
  let storage: Storage;
  const columns = Array.from({ length: 40 }, (_, i) => `c${i}`);

  beforeAll(async () => {
    storage = createStorage('sqlite::memory:');
    await sql.raw(`create table wide (id integer primary key, ${columns.map((c) => `${c} text`).join(', ')}, n integer, b blob)`).execute(storage.db);
    await sql
      .raw(`insert into wide (id, ${columns.join(', ')}, n, b) values (1, ${columns.map((c) => `'${c}-value'`).join(', ')}, 7, x'00ff'), (2, ${columns.map(() => 'null').join(', ')}, null, null)`)
      .execute(storage.db);
  });
  afterAll(() => storage.close());

  it('hold every column of a wide row, with its value and type', async () => {
    const { rows } = await sql<Record<string, unknown>>`select * from wide order by id`.execute(storage.db);
    expect(rows).toHaveLength(2);
    expect(Object.keys(rows[0]!)).toEqual(['id', ...columns, 'n', 'b']);
    expect(rows[0]).toMatchObject({ id: 1, c0: 'c0-value', c39: 'c39-value', n: 7 });
    expect(rows[0]!.b).toEqual(Buffer.from([0x00, 0xff]));
    expect(rows[1]).toMatchObject({ id: 2, c0: null, c39: null, n: null, b: null });
  });

  it('keep the last value of a name selected twice', async () => {
    const { rows } = await sql<Record<string, unknown>>`select c0 as x, c1 as x from wide where id = 1`.execute(storage.db);
    expect(rows[0]!.x).toBe('c1-value');
  });

  it('come back from INSERT … RETURNING and from a stream as from a SELECT', async () => {
    const inserted = await sql<{ id: number; c5: string }>`insert into wide (id, c5) values (3, 'five') returning id, c5`.execute(storage.db);
    expect(inserted.rows).toEqual([{ id: 3, c5: 'five' }]);
    const streamed: unknown[] = [];
    for await (const row of storage.db.selectFrom('wide' as never).select(['id' as never, 'c5' as never]).orderBy('id' as never).stream()) streamed.push(row);
    expect(streamed).toEqual([
      { id: 1, c5: 'c5-value' },
      { id: 2, c5: null },
      { id: 3, c5: 'five' },
    ]);
  });
});
