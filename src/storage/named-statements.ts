import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import type pg from 'pg';
import { statementName } from './precompiled.js';

/** PostgreSQL's "cached plan must not change result type": a prepared statement whose result columns changed under it. */
const RESULT_TYPE_CHANGED = '0A000';

/**
 * The pool Kysely is given on PostgreSQL: a hot statement (precompiled.ts) run outside a transaction is
 * a named prepared statement through pg's public API (`{ name, text, values }`), parsed and planned once
 * per connection (docs/adr/0001-postgres-named-statements.md); any other SQL, and everything inside a
 * transaction, is sent unnamed. When a migration changed what a prepared statement returns, the server
 * refuses it (0A000) and changed nothing: the statement runs again at once, unnamed, and the connection,
 * whose prepared statements are all suspect now, is discarded when it is released.
 */
export function withNamedStatements(pool: pg.Pool): PostgresPool {
  return {
    async connect(): Promise<PostgresPoolClient> {
      const client = await pool.connect();
      let inTransaction = false;
      let stale = false;
      const run = async (text: string, values: unknown[]): Promise<pg.QueryResult> => {
        // Kysely's PostgresDriver opens and ends its transactions with these texts.
        if (text === 'begin' || text.startsWith('start transaction')) inTransaction = true;
        else if (text === 'commit' || text === 'rollback') inTransaction = false;
        const name = inTransaction ? undefined : statementName(text);
        if (name === undefined) return client.query({ text, values });
        try {
          return await client.query({ name, text, values });
        } catch (error) {
          if ((error as { code?: unknown }).code !== RESULT_TYPE_CHANGED) throw error;
          stale = true;
          return client.query({ text, values });
        }
      };
      function query<R>(sql: string, values: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
      function query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
      // Kysely passes a cursor only when the dialect is given one to stream with; this one is not.
      function query<R>(sql: string | PostgresCursor<R>, values?: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
        if (typeof sql !== 'string') throw new Error('streaming queries are not configured');
        return run(sql, values as unknown[]).then(({ command, rowCount, rows }) => ({
          // Kysely counts the rows of the commands it names and ignores any other.
          command: command as PostgresQueryResult<R>['command'],
          rowCount: rowCount ?? 0,
          rows: rows as R[],
        }));
      }
      return { query, release: () => client.release(stale) };
    },
    end: () => pool.end(),
  };
}
