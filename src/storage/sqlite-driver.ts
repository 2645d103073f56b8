import { AsyncLocalStorage } from 'node:async_hooks';
import type { Database as SQLiteDatabase, Statement } from 'better-sqlite3';
import {
  CompiledQuery,
  type DatabaseConnection,
  type Driver,
  type QueryResult,
  SqliteAdapter,
  SqliteIntrospector,
  SqliteQueryCompiler,
  type Dialect,
  type Kysely,
} from 'kysely';

/**
 * Kysely over better-sqlite3 without freezing the process on a lock (issue 11; SECURITY.md item 98).
 *
 * better-sqlite3 is synchronous: with a long `busy_timeout` a write lock held by another process (a
 * second worker, a backup, `sqlite3` in a shell) stops the whole event loop until it is released. So
 * SQLite itself waits only BUSY_SLICE_MS per attempt, and a busy statement is retried after an
 * asynchronous pause, until `busyBudgetMs` after the HTTP request began (`lockWaitDeadline`; for work
 * outside a request, after the query asked for the connection); then the SQLITE_BUSY error reaches the
 * caller (503 + Retry-After). So a request making several queries still answers within its budget,
 * and meanwhile other requests, `/healthz` included, are served.
 *
 * Retrying a statement is safe because a statement that answered SQLITE_BUSY changed nothing, and
 * transactions start with `BEGIN IMMEDIATE`: the write lock is taken at the start, where a retry has
 * no earlier work to lose, and a transaction never meets SQLITE_BUSY_SNAPSHOT half-way (a deferred
 * transaction that read first and then wants to write cannot be saved by retrying the statement).
 *
 * One connection per process, as Kysely's own SqliteDriver: callers queue on a mutex. Prepared
 * statements are kept (up to STATEMENT_CACHE_SIZE) instead of being compiled again on every query.
 */

/** How long SQLite itself may block the event loop waiting for a lock, per attempt. */
export const BUSY_SLICE_MS = 10;
const STATEMENT_CACHE_SIZE = 500;
const MAX_PAUSE_MS = 100;

export interface SqliteDialectOptions {
  database: SQLiteDatabase;
  /** How long a request may wait for another process's write lock before it fails with SQLITE_BUSY. */
  busyBudgetMs: number;
}

export class NonBlockingSqliteDialect implements Dialect {
  constructor(private readonly options: SqliteDialectOptions) {}
  createDriver(): Driver {
    return new NonBlockingSqliteDriver(this.options);
  }
  createQueryCompiler() {
    return new SqliteQueryCompiler();
  }
  createAdapter() {
    return new SqliteAdapter();
  }
  createIntrospector(db: Kysely<any>) {
    return new SqliteIntrospector(db);
  }
}

/**
 * The deadline (a `performance.now()` time) of the HTTP request being served: every query it makes
 * shares it. Entered per request by the db plugin.
 */
export const lockWaitDeadline = new AsyncLocalStorage<number>();

const isBusy = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || (typeof code === 'string' && code.startsWith('SQLITE_BUSY_'));
};

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

class NonBlockingSqliteDriver implements Driver {
  private readonly connection: NonBlockingSqliteConnection;
  private leased = false;
  private readonly waiting: Array<() => void> = [];

  constructor(private readonly options: SqliteDialectOptions) {
    options.database.pragma(`busy_timeout = ${BUSY_SLICE_MS}`);
    this.connection = new NonBlockingSqliteConnection(options.database);
  }

  async init(): Promise<void> {}

  /**
   * Waits for the one connection, but not past the deadline: whoever holds it may itself be waiting
   * for another process's lock, and a request queued behind it must still answer within its budget.
   */
  async acquireConnection(): Promise<DatabaseConnection> {
    const deadline = lockWaitDeadline.getStore() ?? performance.now() + this.options.busyBudgetMs;
    if (this.leased) await this.turn(deadline);
    this.leased = true;
    this.connection.lease(deadline);
    return this.connection;
  }

  private turn(deadline: number): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const granted = () => {
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(granted), 1);
        reject(Object.assign(new Error('database is locked: no connection within the lock-wait budget'), { code: 'SQLITE_BUSY' }));
      }, Math.max(0, deadline - performance.now()));
      this.waiting.push(granted);
    });
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('begin immediate'));
  }
  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('commit'));
  }
  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    await connection.executeQuery(CompiledQuery.raw('rollback'));
  }
  async releaseConnection(): Promise<void> {
    // Handed straight to the next in line, or left free.
    const next = this.waiting.shift();
    if (next) next();
    else this.leased = false;
  }
  async destroy(): Promise<void> {
    this.options.database.close();
  }
}

class NonBlockingSqliteConnection implements DatabaseConnection {
  private readonly statements = new Map<string, Statement>();
  private deadline = 0;

  constructor(private readonly database: SQLiteDatabase) {}

  /** The holder's deadline for lock waits (see acquireConnection). */
  lease(deadline: number): void {
    this.deadline = deadline;
  }

  async executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return this.run<R>(compiledQuery);
      } catch (error) {
        if (!isBusy(error) || performance.now() >= this.deadline) throw error;
        await pause(Math.min(MAX_PAUSE_MS, 5 * 2 ** attempt, Math.max(1, this.deadline - performance.now())));
      }
    }
  }

  private run<R>({ sql, parameters }: CompiledQuery): QueryResult<R> {
    const statement = this.prepare(sql);
    if (statement.reader) return { rows: statement.all(parameters) as R[] };
    const { changes, lastInsertRowid } = statement.run(parameters);
    return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
  }

  private prepare(sql: string): Statement {
    let statement = this.statements.get(sql);
    if (!statement) {
      statement = this.database.prepare(sql);
      // Oldest first out: Map keeps insertion order.
      if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.delete(this.statements.keys().next().value!);
      this.statements.set(sql, statement);
    }
    return statement;
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    for (const row of this.prepare(compiledQuery.sql).iterate(compiledQuery.parameters)) yield { rows: [row as R] };
  }
}
