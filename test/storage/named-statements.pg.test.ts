import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/storage/migrator.js';
import { precompiled, statementName } from '../../src/storage/precompiled.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { createTestStorage } from '../helpers/app.js';

// PostgreSQL only: hot statements (precompiled.ts) run as named prepared statements, parsed and planned
// once per connection; other SQL is not prepared, so the server keeps no statement per ad-hoc query.

const selectUserEmail = precompiled((db, id: string) => db.selectFrom('users').select('email').where('id', '=', id));

/** The statements prepared on the connection that runs this query (pg's pool hands back the last idle one). */
async function preparedHere(storage: Storage): Promise<Array<{ name: string; statement: string }>> {
  const result = await sql<{ name: string; statement: string }>`select name, statement from pg_prepared_statements order by name`.execute(storage.db);
  return result.rows;
}

describe('named prepared statements on PostgreSQL', () => {
  let storage: Storage;
  let drop: () => Promise<void>;
  let url: string;
  beforeAll(async () => {
    ({ storage, drop, url } = await createTestStorage());
    await migrateToLatest(storage);
    await sql`insert into users (id, email, email_verified, status, created_at, updated_at) values ('usr_1', 'a@example.com', 1, 'active', 1, 1)`.execute(storage.db);
  });
  afterAll(async () => {
    await storage.close();
    await drop();
  });

  it('a precompiled statement is prepared under its name, once, and answers with each call\'s parameters', async () => {
    expect((await selectUserEmail(storage.db, 'usr_1')).rows).toEqual([{ email: 'a@example.com' }]);
    expect((await selectUserEmail(storage.db, 'usr_missing')).rows).toEqual([]);
    const prepared = await preparedHere(storage);
    const ours = prepared.filter((p) => p.name.startsWith('gatehouse_'));
    expect(ours).toHaveLength(1);
    expect(statementName(ours[0]!.statement)).toBe(ours[0]!.name);
    expect(ours[0]!.statement).toMatch(/^select "email" from "users" where "id" = \$1$/);
    // Ad-hoc SQL (the catalog read itself, the inserts above) is never prepared.
    expect(prepared.filter((p) => !p.name.startsWith('gatehouse_'))).toEqual([]);
  });

  it('inside a transaction too, and a connection the server ended is replaced and prepares again', async () => {
    // A storage of its own, used one query at a time: its pool holds exactly one connection.
    const own = createStorage(url);
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
});
