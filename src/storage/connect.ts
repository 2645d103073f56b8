import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';
import { withNamedStatements } from './named-statements.js';
import { NonBlockingSqliteDialect } from './sqlite-driver.js';

export type Dialect = 'sqlite' | 'postgres';

/** An open database. */
export interface Storage {
  dialect: Dialect;
  db: Kysely<Database>;
  /** True when the database answers a trivial query within a second. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

// Stored times are bigint epoch seconds and counts come back as int8: read both as JS numbers.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

/** SQLite's page cache per connection, in KiB (see createStorage). */
const SQLITE_CACHE_KIB = 2000;

/** How long a request waits for another process's SQLite write lock before it answers 503. */
const SQLITE_BUSY_BUDGET_MS = 5000;

/** Opens the database named by DATABASE_URL: `sqlite:<path>` (`sqlite::memory:` in tests) or `postgres://…`. */
export function createStorage(url: string): Storage {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const database = new SQLite(path);
    // Power-loss durable: WAL with synchronous=FULL (the group commit pays for it, docs/adr/0003-sqlite-group-commit.md).
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = FULL');
    database.pragma('foreign_keys = ON');
    // SQLite's own page-cache default (2 MiB), where better-sqlite3 compiles in 16 MiB: a cache that
    // fills as the file grows showed as RSS climbing ~4 MB a minute under load until full, past 200 MB
    // under a login burst. The kernel's page cache still holds the file; grants and reads measured alike,
    // within the runs' spread.
    database.pragma(`cache_size = -${SQLITE_CACHE_KIB}`);
    const db = new Kysely<Database>({ dialect: new NonBlockingSqliteDialect({ database, busyBudgetMs: SQLITE_BUSY_BUDGET_MS }) });
    return { db, dialect: 'sqlite', ping: () => ping(db), close: () => db.destroy() };
  }
  const pool = new pg.Pool({
    connectionString: url,
    max: 10,
    connectionTimeoutMillis: 5000,
    idleTimeoutMillis: 30_000,
    // A statement stuck behind a lock fails instead of hanging the request.
    statement_timeout: 15_000,
  });
  // A client losing its connection (database restart, failover, terminated backend) must not crash
  // the process: pg-pool listens on idle clients only, so every client gets its own listener too. The
  // query in flight fails with "Connection terminated", which the error handler answers with 503.
  pool.on('error', () => undefined);
  pool.on('connect', (client) => client.on('error', () => undefined));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool: withNamedStatements(pool) }) });
  return { db, dialect: 'postgres', ping: () => ping(db), close: () => db.destroy() };
}

/** How long readiness waits for the database: an outage shows in `/readyz` within about this long. */
const PING_TIMEOUT_MS = 800;

/** True when `select 1` answers within PING_TIMEOUT_MS (a pool or queue stuck behind a dead server counts as down). */
async function ping(db: Kysely<Database>): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<boolean>((resolve) => {
    timer = setTimeout(() => resolve(false), PING_TIMEOUT_MS);
  });
  const query = sql`select 1`.execute(db).then(
    () => true,
    () => false,
  );
  try {
    return await Promise.race([query, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
