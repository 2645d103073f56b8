import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';
import { statementName } from './precompiled.js';

/**
 * The pool Kysely is given on PostgreSQL: every hot statement (precompiled.ts) runs as a named prepared
 * statement, parsed and planned once per connection instead of on every call; any other SQL is sent as
 * before. pg remembers per connection which names it has prepared, and only after the server accepted
 * the Parse, so a new connection (after a restart or failover) simply prepares again.
 */
export function withNamedStatements(pool: pg.Pool): PostgresPool {
  // Kysely keeps one connection object per pool client it is handed, so a client keeps its wrapper.
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    function query<R>(sql: string, values: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
    function query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
    // Kysely passes a cursor only when the dialect is given one to stream with; this one is not.
    function query<R>(sql: string | PostgresCursor<R>, values?: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
      if (typeof sql !== 'string') throw new Error('streaming queries are not configured');
      return client.query({ name: statementName(sql), text: sql, values: values as unknown[] }).then(({ command, rowCount, rows }) => ({
        // Kysely counts the rows of the commands it names and ignores any other.
        command: command as PostgresQueryResult<R>['command'],
        rowCount: rowCount ?? 0,
        rows: rows as R[],
      }));
    }
    return { query, release: () => client.release() };
  };
  return {
    async connect() {
      const client = await pool.connect();
      let wrapper = wrappers.get(client);
      if (!wrapper) {
        wrapper = wrap(client);
        wrappers.set(client, wrapper);
      }
      return wrapper;
    },
    end: () => pool.end(),
  };
}
