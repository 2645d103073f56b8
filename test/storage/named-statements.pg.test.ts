import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { precompiled, statementName } from '../../src/storage/precompiled.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { withNamedStatements } from '../../src/storage/named-statements.js';
import type { Database } from '../../src/storage/schema.js';
import { useMigratedTestStorage } from '../helpers/app.js';

// PostgreSQL only: hot statements (precompiled.ts) run as named prepared statements, parsed, planned and
// described once per connection; other SQL is not prepared, so the server keeps no statement per ad-hoc query.

const selectUserEmail = precompiled((db, id: string) => db.selectFrom('users').select('email').where('id', '=', id));
const selectUserRow = precompiled((db, id: string) => db.selectFrom('users').select(['id', 'email', 'email_verified', 'name', 'created_at']).where('id', '=', id));
const selectUserCreatedBefore = precompiled((db, id: string, before: number) => db.selectFrom('users').select('id').where('id', '=', id).where('created_at', '<', before));
const touchUser = precompiled((db, id: string, at: number) => db.updateTable('users').set({ updated_at: at }).where('id', '=', id));

/** The statements prepared on the connection that runs this query (pg's pool hands back the last idle one). */
async function preparedHere(storage: Storage): Promise<Array<{ name: string; statement: string }>> {
  const result = await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements order by name`.execute(storage.db);
  return result.rows;
}

describe('named prepared statements on PostgreSQL', () => {
  const database = useMigratedTestStorage();
  beforeAll(async () => {
    await sql`insert into users (id, email, email_verified, status, created_at, updated_at) values ('usr_1', 'a@example.com', 1, 'active', 1, 1)`.execute(database.storage.db);
  });

  it('a precompiled statement is prepared under its name, once, and answers with each call\'s parameters', async () => {
    expect((await selectUserEmail(database.storage.db, 'usr_1')).rows).toEqual([{ email: 'a@example.com' }]);
    expect((await selectUserEmail(database.storage.db, 'usr_missing')).rows).toEqual([]);
    const prepared = await preparedHere(database.storage);
    const ours = prepared.filter((p) => p.name.startsWith('gatehouse_'));
    expect(ours).toHaveLength(1);
    expect(statementName(ours[0]!.statement)).toBe(ours[0]!.name);
    expect(ours[0]!.statement).toMatch(/^select "email" from "users" where "id" = \$1$/);
    // Ad-hoc SQL (the catalog read itself, the inserts above) is never prepared.
    expect(prepared.filter((p) => !p.name.startsWith('gatehouse_'))).toEqual([]);
  });

  it('inside a transaction too, and a connection the server ended is replaced and prepares again', async () => {
    // A storage of its own, used one query at a time: its pool holds exactly one connection.
    const own = createStorage(database.url);
    try {
      const backend = async () => (await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(own.db)).rows[0]!.pid;
      const before = await backend();
      await own.db.transaction().execute(async (trx) => {
        expect((await selectUserEmail(trx, 'usr_1')).rows).toEqual([{ email: 'a@example.com' }]);
      });
      expect((await preparedHere(own)).map((p) => p.name).filter((n) => n.startsWith('gatehouse_'))).toHaveLength(1);
      await expect(sql`select pg_terminate_backend(pg_backend_pid())`.execute(own.db)).rejects.toThrow();
      // The pool drops the dead client once its socket closes (a query that meets it first fails, as any
      // request then answers 503); the new connection knows no statement, so pg prepares it there anew
      // (were the name taken for prepared, the server would answer "prepared statement does not exist").
      let rows: unknown[] | undefined;
      for (let attempt = 0; attempt < 3 && rows === undefined; attempt++) {
        rows = await selectUserEmail(own.db, 'usr_1').then(
          (result) => result.rows,
          (error: Error) => {
            expect(error.message).toMatch(/Connection terminated/);
            return undefined;
          },
        );
      }
      expect(rows).toEqual([{ email: 'a@example.com' }]);
      expect(await backend()).not.toBe(before);
      expect((await preparedHere(own)).map((p) => p.name).filter((n) => n.startsWith('gatehouse_'))).toHaveLength(1);
    } finally {
      await own.close();
    }
  });

  it('a statement is described once per connection: later executions reuse its columns and parse rows the same', async () => {
    // One connection, and a count of the result descriptions the server sends on it.
    const pool = new pg.Pool({ connectionString: database.url, max: 1 });
    // Describe is answered with RowDescription, or with NoData for a statement without rows.
    let descriptions = 0;
    pool.on('connect', (client) => {
      const { connection } = client as pg.PoolClient & { connection: pg.Connection };
      for (const answer of ['rowDescription', 'noData']) connection.on(answer, () => descriptions++);
    });
    const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: withNamedStatements(pool) }) });
    try {
      const expected = { id: 'usr_1', email: 'a@example.com', email_verified: 1, name: null, created_at: 1 };
      for (let i = 0; i < 3; i++) expect((await selectUserRow(db, 'usr_1')).rows).toEqual([expected]);
      expect((await selectUserRow(db, 'usr_missing')).rows).toEqual([]);
      expect(descriptions).toBe(1);
      // Another statement is described on its own first execution; inside a transaction as well.
      await db.transaction().execute(async (trx) => {
        expect((await selectUserEmail(trx, 'usr_1')).rows).toEqual([{ email: 'a@example.com' }]);
        expect((await selectUserRow(trx, 'usr_1')).rows).toEqual([expected]);
      });
      expect(descriptions).toBe(2);
      // Writes without rows too, and they report their counts each time.
      expect((await touchUser(db, 'usr_1', 2)).numAffectedRows).toBe(1n);
      expect((await touchUser(db, 'usr_missing', 2)).numAffectedRows).toBe(0n);
      expect((await touchUser(db, 'usr_1', 3)).numAffectedRows).toBe(1n);
      expect(descriptions).toBe(3);
      // Ad-hoc SQL is described as always.
      expect((await sql<{ n: number }>`select 1 as n`.execute(db)).rows).toEqual([{ n: 1 }]);
      expect((await sql<{ n: number }>`select 1 as n`.execute(db)).rows).toEqual([{ n: 1 }]);
      expect(descriptions).toBe(5);
      // An execution the server refuses after the description was learnt fails as before, and the connection goes on.
      expect((await selectUserCreatedBefore(db, 'usr_1', 10)).rows).toEqual([{ id: 'usr_1' }]);
      await expect(selectUserCreatedBefore(db, 'usr_1', 'not a number' as unknown as number)).rejects.toThrow(/invalid input syntax for type bigint/);
      expect((await selectUserCreatedBefore(db, 'usr_1', 10)).rows).toEqual([{ id: 'usr_1' }]);
      expect((await selectUserCreatedBefore(db, 'usr_1', 1)).rows).toEqual([]);
      expect(descriptions).toBe(6);
    } finally {
      await db.destroy();
    }
  });
});
