import { sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import { precompiled } from '../../src/storage/precompiled.js';
import { useMigratedTestStorage } from '../helpers/app.js';

// PostgreSQL only: hot statements run outside a transaction are named prepared statements (pg's
// `{ name, text, values }`); one whose result type a migration changed is run again unnamed, and its
// connection is discarded (docs/adr/0001-postgres-named-statements.md). Queries here run one at a
// time, so the pool keeps handing out the same connection until it is discarded.

// A whole-row read, as no repo may write it (test/storage/explicit-columns.test.ts): its result type changes with the table.
const selectWholeUser = precompiled((db, id: string) => db.selectFrom('users').selectAll().where('id', '=', id));
const selectUserEmail = precompiled((db, id: string) => db.selectFrom('users').select('email').where('id', '=', id));

describe('named prepared statements on PostgreSQL', () => {
  const database = useMigratedTestStorage();
  const backend = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(database.storage.db)).rows[0]!.pid;
  const prepared = async () => (await sql<{ name: string }>`select name from pg_prepared_statements`.execute(database.storage.db)).rows.map((r) => r.name);

  it('prepares a hot statement under its name outside a transaction, never inside one', async () => {
    const { db } = database.storage;
    await sql`insert into users (id, email, email_verified, status, created_at, updated_at) values ('usr_1', 'a@example.com', 1, 'active', 1, 1)`.execute(db);
    await db.transaction().execute(async (trx) => {
      expect((await selectUserEmail(trx, 'usr_1')).rows).toEqual([{ email: 'a@example.com' }]);
      expect((await sql<{ name: string }>`select name from pg_prepared_statements`.execute(trx)).rows).toEqual([]);
    });
    expect((await selectUserEmail(db, 'usr_1')).rows).toEqual([{ email: 'a@example.com' }]);
    const names = await prepared();
    expect(names).toHaveLength(1);
    expect(names[0]).toMatch(/^gatehouse_\d+$/);
  });

  it('runs a statement whose result type changed again, unnamed, and discards its connection', async () => {
    const { db } = database.storage;
    expect(Object.keys((await selectWholeUser(db, 'usr_1')).rows[0]!)).not.toContain('probe');
    const before = await backend();
    await sql`alter table users add column probe text`.execute(db);
    // PostgreSQL refuses the prepared statement (0A000): the call still answers, with the new column.
    expect((await selectWholeUser(db, 'usr_1')).rows[0]).toMatchObject({ id: 'usr_1', probe: null });
    // That connection is gone; the next one prepares the statement anew.
    expect(await backend()).not.toBe(before);
    expect((await selectWholeUser(db, 'usr_1')).rows[0]).toMatchObject({ id: 'usr_1', probe: null });
    expect((await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity where pid = ${before}`.execute(db)).rows[0]!.n).toBe(0);
  });
});
