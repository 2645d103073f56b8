import { mkdirSync } from 'node:fs';
import { dirname } from 'node:path';
import SQLite from 'better-sqlite3';
import { Kysely, PostgresDialect, SqliteDialect, sql } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.js';

export type Dialect = 'sqlite' | 'postgres';

export interface Storage {
  db: Kysely<Database>;
  dialect: Dialect;
  /** True when the database answers a trivial query. */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

// Stored times are bigint epoch seconds and counts come back as int8: read both as JS numbers.
pg.types.setTypeParser(20, (v) => Number.parseInt(v, 10));

/** Opens the database named by DATABASE_URL: `sqlite:<path>` (`sqlite::memory:` in tests) or `postgres://…`. */
export function createStorage(url: string): Storage {
  if (url.startsWith('sqlite:')) {
    const path = url.slice('sqlite:'.length);
    if (path !== ':memory:') mkdirSync(dirname(path), { recursive: true });
    const database = new SQLite(path);
    // Power-loss durable (SECURITY.md item 94): WAL with synchronous=FULL.
    database.pragma('journal_mode = WAL');
    database.pragma('synchronous = FULL');
    database.pragma('foreign_keys = ON');
    database.pragma('busy_timeout = 5000');
    const db = new Kysely<Database>({ dialect: new SqliteDialect({ database }) });
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
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return { db, dialect: 'postgres', ping: () => ping(db), close: () => db.destroy() };
}

async function ping(db: Kysely<Database>): Promise<boolean> {
  try {
    await sql`select 1`.execute(db);
    return true;
  } catch {
    return false;
  }
}
