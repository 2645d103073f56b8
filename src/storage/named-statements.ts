import type { PostgresCursor, PostgresPool, PostgresPoolClient, PostgresQueryResult } from 'kysely';
import pg, { type Connection, type FieldDef } from 'pg';
import { statementName } from './precompiled.js';

declare module 'pg' {
  // Steps of the extended-query protocol in pg's Query (pg/lib/query.js) that its type declarations leave out.
  interface Query {
    /** Sends Parse (the first time on a connection), Bind, Describe, Execute and Sync. */
    prepare(connection: Connection): void;
    /** Takes the result's columns, from the server's RowDescription. */
    handleRowDescription(message: { fields: FieldDef[] }): void;
    /** Takes the server's CommandComplete (after the rows, if any). */
    handleCommandComplete(message: { text: string }, connection: Connection): void;
  }
}

/** What the statements run on one connection have learnt: each one's columns, by statement name. */
interface ConnectionMemory {
  columns: Map<string, FieldDef[]>;
  /** The connection as pg's prepare sees it once the columns are known: Describe is not sent. */
  withoutDescribe?: Connection;
}

/**
 * One execution of a named statement that asks the server for the statement's columns only the first
 * time on a connection. pg's Query sends Describe with every execution, so the server describes the
 * result anew and pg rebuilds its row parsers from the answer each time: a seventh of a bearer read's
 * time on PostgreSQL (bench/RESULTS.md, finding 39). A prepared statement's columns cannot change while
 * it exists on its connection (the server refuses to run it if its result type changed), so the
 * columns the first execution learnt serve every later one on that connection.
 */
class DescribedOnceQuery extends pg.Query {
  private readonly statement: string;

  constructor(
    config: pg.QueryConfig & { name: string },
    private readonly memory: ConnectionMemory,
    done: (error: Error | undefined, result: pg.QueryResult) => void,
  ) {
    super(config, done);
    this.statement = config.name;
  }

  override prepare(connection: Connection): void {
    const fields = this.memory.columns.get(this.statement);
    if (!fields) return super.prepare(connection);
    // Described here before, so also parsed here: Bind, Execute and Sync, with the known columns.
    super.handleRowDescription({ fields });
    this.memory.withoutDescribe ??= Object.create(connection, { describe: { value: () => undefined } }) as Connection;
    super.prepare(this.memory.withoutDescribe);
  }

  override handleRowDescription(message: { fields: FieldDef[] }): void {
    super.handleRowDescription(message);
    this.memory.columns.set(this.statement, message.fields);
  }

  override handleCommandComplete(message: { text: string }, connection: Connection): void {
    // Completed without a RowDescription: a statement that returns no rows (its Describe got NoData).
    if (!this.memory.columns.has(this.statement)) this.memory.columns.set(this.statement, []);
    super.handleCommandComplete(message, connection);
  }
}

/**
 * The pool Kysely is given on PostgreSQL: every hot statement (precompiled.ts) runs as a named prepared
 * statement, parsed, planned and described once per connection instead of on every call; any other SQL
 * is sent as before. pg remembers per connection which names it has prepared, and only after the server
 * accepted the Parse, so a new connection (after a restart or failover) simply prepares again.
 */
export function withNamedStatements(pool: pg.Pool): PostgresPool {
  // Kysely keeps one connection object per pool client it is handed, so a client keeps its wrapper.
  const wrappers = new WeakMap<pg.PoolClient, PostgresPoolClient>();
  const wrap = (client: pg.PoolClient): PostgresPoolClient => {
    // A pool client is one server connection for its whole life: what was described on it stays valid.
    const memory: ConnectionMemory = { columns: new Map() };
    const run = (sql: string, values: unknown[]): Promise<pg.QueryResult> => {
      const name = statementName(sql);
      if (name === undefined) return client.query({ text: sql, values });
      return new Promise((resolve, reject) => {
        client.query(
          // pg hands a query of its own kind its Result, which carries command, rowCount and rows.
          new DescribedOnceQuery({ name, text: sql, values }, memory, (error, result) => (error ? reject(error) : resolve(result))),
        );
      });
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
