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
 * Kysely over better-sqlite3, built for a server (docs/adr/0003-sqlite-group-commit.md).
 *
 * **Never freezing the process on a lock.** better-sqlite3 is synchronous: with a long `busy_timeout`
 * a write lock held by another process (a second worker, a backup, `sqlite3` in a shell) stops the
 * whole event loop until it is released. So SQLite itself waits only BUSY_SLICE_MS per attempt, and a
 * busy statement is retried after an asynchronous pause, until `busyBudgetMs` after the query asked
 * for the connection, or after the lock was first found held (see retryingBusy); then the SQLITE_BUSY
 * error reaches the caller (503 + Retry-After). Waiting in line for the connection counts against the
 * same deadline. Meanwhile other requests, `/healthz` included, are served. (A deadline per HTTP
 * request would need AsyncLocalStorage, whose promise hooks cost every request on Node 20 more than
 * they would save.)
 *
 * **Group commit.** With `synchronous=FULL` every COMMIT waits for the disk (about half a millisecond
 * here), which would cap the whole server at a few thousand commits a second. So writes share physical
 * transactions: the first write opens one (`BEGIN IMMEDIATE`), each Kysely transaction runs inside it
 * as a savepoint (a failed one rolls back alone), and the physical COMMIT happens when nobody else is
 * waiting for the connection (after the current turn of the event loop) or the batch is full. No
 * caller sees its result before the COMMIT that made it durable has returned: a lease that ran any
 * statement inside an open batch waits for that batch's commit when it is released (Kysely awaits the
 * release before handing back the result) — reads too, so nothing is ever answered from data that
 * could still be lost. A failed COMMIT fails every member (503), and none of them was acknowledged.
 *
 * Retrying a statement is safe because a statement that answered SQLITE_BUSY changed nothing, and
 * batches start with `BEGIN IMMEDIATE`: the write lock is taken at the start, where a retry has no
 * earlier work to lose, and never meets SQLITE_BUSY_SNAPSHOT half-way.
 *
 * One connection per process, as Kysely's own SqliteDriver. Prepared statements are kept (up to
 * STATEMENT_CACHE_SIZE) instead of being compiled again on every query.
 */

/** How long SQLite itself may block the event loop waiting for a lock, per attempt. */
export const BUSY_SLICE_MS = 10;
const STATEMENT_CACHE_SIZE = 500;
const MAX_PAUSE_MS = 100;
/** A batch commits once it has this many members or is this old, even while others wait to join. */
const MAX_BATCH_MEMBERS = 64;
const MAX_BATCH_MS = 20;
const SAVEPOINT = 'gh_tx';

export interface SqliteDialectOptions {
  database: SQLiteDatabase;
  /** How long a request may wait for another process's write lock before it fails with SQLITE_BUSY. */
  busyBudgetMs: number;
}

export class NonBlockingSqliteDialect implements Dialect {
  private readonly driver: NonBlockingSqliteDriver;
  constructor(options: SqliteDialectOptions) {
    this.driver = new NonBlockingSqliteDriver(options);
  }
  createDriver(): Driver {
    return this.driver;
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

const isBusy = (error: unknown) => {
  const code = (error as { code?: unknown } | null)?.code;
  return code === 'SQLITE_BUSY' || code === 'SQLITE_LOCKED' || (typeof code === 'string' && code.startsWith('SQLITE_BUSY_'));
};

const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** One physical transaction shared by the leases that wrote (or read) while it was open. */
class Batch {
  readonly openedAt = performance.now();
  members = 0;
  /** Why the batch failed (its COMMIT, or SQLite rolled it back); none of its members' writes is kept. */
  failure: unknown;
  readonly durable: Promise<void>;
  resolve!: () => void;
  reject!: (error: unknown) => void;
  constructor() {
    this.durable = new Promise<void>((resolve, reject) => {
      this.resolve = resolve;
      this.reject = reject;
    });
    this.durable.catch(() => undefined); // awaited by the members; nobody else must see a rejection
  }
}

class NonBlockingSqliteDriver implements Driver {
  private readonly statements = new Map<string, Statement>();
  private holder: Lease | null = null;
  /** Leases queued for the connection, each with the function that hands it over. */
  private readonly waiting: Array<{ lease: Lease; grant: () => void }> = [];
  private batch: Batch | null = null;
  private commitScheduled = false;
  /** When SQLite first answered busy since this process last got the write lock (another process holds it). */
  private busySince: number | null = null;

  constructor(private readonly options: SqliteDialectOptions) {
    options.database.pragma(`busy_timeout = ${BUSY_SLICE_MS}`);
  }

  async init(): Promise<void> {}

  /**
   * Waits for the one connection, but not past the deadline: whoever holds it may itself be waiting
   * for another process's lock, and a request queued behind it must still answer within its budget.
   */
  async acquireConnection(): Promise<DatabaseConnection> {
    const lease = new Lease(this, performance.now() + this.options.busyBudgetMs);
    if (this.holder) await this.turn(lease);
    else this.holder = lease;
    return lease;
  }

  /**
   * Queues `lease` until the holder hands the connection over. The handover makes it the holder at
   * once (releaseConnection), not when its continuation runs: in between, another caller must not
   * find the connection free, or two leases would interleave statements in one transaction.
   */
  private turn(lease: Lease): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        lease,
        grant: () => {
          clearTimeout(timer);
          this.holder = lease;
          resolve();
        },
      };
      const timer = setTimeout(() => {
        this.waiting.splice(this.waiting.indexOf(waiter), 1);
        reject(Object.assign(new Error('database is locked: no connection within the lock-wait budget'), { code: 'SQLITE_BUSY' }));
      }, Math.max(0, lease.deadline - performance.now()));
      this.waiting.push(waiter);
    });
  }

  async beginTransaction(connection: DatabaseConnection): Promise<void> {
    const lease = connection as Lease;
    await this.joinBatch(lease);
    this.inBatch(lease, () => this.exec(`savepoint ${SAVEPOINT}`));
    lease.inTransaction = true;
  }

  async commitTransaction(connection: DatabaseConnection): Promise<void> {
    const lease = connection as Lease;
    lease.inTransaction = false;
    this.inBatch(lease, () => this.exec(`release ${SAVEPOINT}`));
  }

  async rollbackTransaction(connection: DatabaseConnection): Promise<void> {
    const lease = connection as Lease;
    lease.inTransaction = false;
    // Nothing to undo when SQLite rolled the whole batch back (inBatch failed it then).
    if (lease.batch?.failure !== undefined) return;
    this.inBatch(lease, () => {
      this.exec(`rollback to ${SAVEPOINT}`);
      this.exec(`release ${SAVEPOINT}`);
    });
  }

  /** Hands the connection on, then waits until what this lease saw or wrote is committed. */
  async releaseConnection(connection: DatabaseConnection): Promise<void> {
    const lease = connection as Lease;
    if (this.holder !== lease) return;
    this.holder = null;
    const batch = lease.batch;
    if (this.batch && (this.batch.members >= MAX_BATCH_MEMBERS || performance.now() - this.batch.openedAt >= MAX_BATCH_MS)) this.commit();
    const next = this.waiting.shift();
    if (next) next.grant();
    else if (this.batch) this.scheduleCommit();
    if (batch) await batch.durable;
  }

  async destroy(): Promise<void> {
    if (this.batch) this.commit();
    this.options.database.close();
  }

  /**
   * Runs one statement for `lease`; a write outside any batch opens one, anything inside one joins it.
   * A write is what SQLite calls not `readonly`: an `INSERT … RETURNING` returns rows (better-sqlite3's
   * `reader`) and is a write all the same; run outside a batch it would commit alone, with its own fsync.
   */
  async execute<R>(lease: Lease, { sql, parameters }: CompiledQuery): Promise<QueryResult<R>> {
    if (this.holder !== lease) throw new Error('a statement on a connection lease that is not the holder');
    const statement = this.prepare(sql);
    if (!lease.batch && (this.batch || !statement.readonly)) await this.joinBatch(lease);
    return this.retryingBusy(lease.deadline, () => this.inBatch(lease, () => resultOf<R>(statement, parameters)));
  }

  /**
   * Runs `work` for `lease` inside the physical transaction of its batch, if it has one. After an error
   * other than busy (disk full, I/O), SQLite may have rolled that whole transaction back by itself: the
   * batch then fails, so every member learns its writes are gone, and the next write opens a new one. A
   * lease of a failed batch runs nothing more: outside any transaction its writes would be durable at
   * once, yet reported failed with the batch.
   */
  private inBatch<T>(lease: Lease, work: () => T): T {
    const batch = lease.batch;
    if (batch?.failure !== undefined) throw batch.failure;
    try {
      return work();
    } catch (error) {
      if (batch && !isBusy(error) && !this.options.database.inTransaction) this.failBatch(batch, error);
      throw error;
    }
  }

  *stream(sql: string, parameters: readonly unknown[]): IterableIterator<unknown> {
    yield* this.prepare(sql).iterate(parameters);
  }

  private async joinBatch(lease: Lease): Promise<void> {
    if (lease.batch) return;
    if (!this.batch) {
      // The batch exists from the moment BEGIN succeeds, with no await in between.
      await this.retryingBusy(lease.deadline, () => {
        this.exec('begin immediate');
        this.batch = new Batch();
        this.busySince = null; // the lock is ours: whatever held it has let go
      });
    }
    lease.batch = this.batch!;
    lease.batch.members += 1;
  }

  private scheduleCommit(): void {
    if (this.commitScheduled) return;
    this.commitScheduled = true;
    // After this turn of the event loop: requests whose I/O is ready now may still join the batch.
    setImmediate(() => {
      this.commitScheduled = false;
      if (!this.holder && this.batch) this.commit();
    });
  }

  private commit(): void {
    const batch = this.batch!;
    this.batch = null;
    try {
      this.exec('commit');
      batch.resolve();
    } catch (error) {
      if (this.options.database.inTransaction) this.exec('rollback');
      this.failBatch(batch, error);
    }
  }

  /** Fails every member of `batch`: none of what they wrote in it is kept. */
  private failBatch(batch: Batch, error: unknown): void {
    batch.failure = error ?? new Error('the batch failed');
    if (this.batch === batch) this.batch = null;
    batch.reject(batch.failure);
  }

  private exec(sql: string): void {
    this.prepare(sql).run();
  }

  /**
   * Runs `work`, retrying while SQLite answers busy, until `deadline` — or until another process has
   * held the lock for the whole budget (`busySince`): then every waiter gives up together and requests
   * arriving during the rest of that lock fail at once, instead of each waiting a budget of its own.
   * A request that waits for the lock more than once (several writes) still answers within one budget.
   */
  private async retryingBusy<T>(deadline: number, work: () => T): Promise<T> {
    for (let attempt = 0; ; attempt += 1) {
      try {
        return work();
      } catch (error) {
        if (!isBusy(error)) throw error;
        const now = performance.now();
        this.busySince ??= now;
        const giveUpAt = Math.min(deadline, this.busySince + this.options.busyBudgetMs);
        if (now >= giveUpAt) throw error;
        await pause(Math.min(MAX_PAUSE_MS, 5 * 2 ** attempt, Math.max(1, giveUpAt - now)));
      }
    }
  }


  private prepare(sql: string): Statement {
    let prepared = this.statements.get(sql);
    if (!prepared) {
      prepared = this.options.database.prepare(sql);
      // Oldest first out: Map keeps insertion order.
      if (this.statements.size >= STATEMENT_CACHE_SIZE) this.statements.delete(this.statements.keys().next().value!);
      this.statements.set(sql, prepared);
    }
    return prepared;
  }
}

/** Runs a statement: its rows when it returns rows, else its changes. */
function resultOf<R>(statement: Statement, parameters: readonly unknown[]): QueryResult<R> {
  if (statement.reader) return { rows: statement.all(parameters) as R[] };
  const { changes, lastInsertRowid } = statement.run(parameters);
  return { numAffectedRows: BigInt(changes), insertId: BigInt(lastInsertRowid), rows: [] };
}

/** One caller's turn with the connection (a query, a transaction, or `db.connection()`). */
class Lease implements DatabaseConnection {
  inTransaction = false;
  /** The batch this lease ran statements in: its commit is awaited when the lease is released. */
  batch: Batch | null = null;

  constructor(
    private readonly driver: NonBlockingSqliteDriver,
    readonly deadline: number,
  ) {}

  executeQuery<R>(compiledQuery: CompiledQuery): Promise<QueryResult<R>> {
    return this.driver.execute<R>(this, compiledQuery);
  }

  async *streamQuery<R>(compiledQuery: CompiledQuery): AsyncIterableIterator<QueryResult<R>> {
    for (const row of this.driver.stream(compiledQuery.sql, compiledQuery.parameters)) yield { rows: [row as R] };
  }
}
