import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll } from 'vitest';
import { buildApp } from '../../src/app.js';
import { parseConfig, type ResolvedConfig } from '../../src/config.js';
import { epochSeconds, type Clock } from '../../src/shared/time.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { migrateToLatest } from '../../src/storage/migrator.js';
import type { Database } from '../../src/storage/schema.js';

/** Which database this test run uses: vitest's `sqlite` and `postgres` projects set TEST_DIALECT. */
export const TEST_DIALECT = (process.env.TEST_DIALECT ?? 'sqlite') as 'sqlite' | 'postgres';

export const TEST_SECRET_KEY = 'test-secret-key-0123456789abcdef-0123456789';
export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

/** A clock tests can move forward; it starts at the real time. */
export class TestClock implements Clock {
  private offset = 0;
  now(): number {
    return epochSeconds() + this.offset;
  }
  advance(seconds: number): void {
    this.offset += seconds;
  }
}

/** A clock that never moves by itself, for tests whose limits count in windows. */
export class FrozenClock extends TestClock {
  constructor(private at: number) {
    super();
  }
  override now(): number {
    return this.at;
  }
  override advance(seconds: number): void {
    this.at += seconds;
  }
}

/** The start of the next `seconds`-long window: a frozen clock set there never straddles a window edge. */
export const nextWindowStart = (seconds: number): number => Math.floor(epochSeconds() / seconds) * seconds + seconds;

/** A fresh, empty database: in-memory SQLite, or a new PostgreSQL database dropped on close. */
export async function createTestStorage(): Promise<{ storage: Storage; url: string; drop: () => Promise<void> }> {
  if (TEST_DIALECT === 'sqlite') {
    const storage = createStorage('sqlite::memory:');
    return { storage, url: 'sqlite::memory:', drop: async () => undefined };
  }
  const adminUrl = process.env.TEST_DATABASE_URL;
  if (!adminUrl) throw new Error('TEST_DIALECT=postgres needs TEST_DATABASE_URL');
  const name = `gh_test_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: adminUrl });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = new URL(adminUrl);
  url.pathname = `/${name}`;
  const storage = createStorage(url.toString());
  return {
    storage,
    url: url.toString(),
    drop: async () => {
      const c = new pg.Client({ connectionString: adminUrl });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * A fresh test database, migrated, for the tests of the enclosing describe block: made before them
 * (before the block's own beforeAll hooks declared after this call), dropped after them.
 */
export function useMigratedTestStorage(): { readonly storage: Storage; readonly url: string } {
  let made: Awaited<ReturnType<typeof createTestStorage>> | undefined;
  beforeAll(async () => {
    made = await createTestStorage();
    await migrateToLatest(made.storage);
  });
  afterAll(async () => {
    await made?.storage.close();
    await made?.drop();
  });
  const current = () => {
    if (!made) throw new Error('the test database is made in beforeAll');
    return made;
  };
  return {
    get storage() {
      return current().storage;
    },
    get url() {
      return current().url;
    },
  };
}

export function testConfig(env: Record<string, string> = {}): ResolvedConfig {
  return parseConfig({
    NODE_ENV: 'test',
    SECRET_KEY: TEST_SECRET_KEY,
    ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    BASE_URL: 'http://localhost:3000',
    LOG_LEVEL: 'info',
    ...env,
  }) as ResolvedConfig;
}

export interface TestApp {
  app: FastifyInstance;
  db: Kysely<Database>;
  /** The database under the app, for another instance on it (`buildTestApp({ storage })`). */
  storage: Storage;
  clock: TestClock;
  config: ResolvedConfig;
  /** Every log line written so far (JSON strings), for secret-leak assertions. */
  logs: string[];
  close(): Promise<void>;
}

/**
 * Builds the real application on a fresh database with a controllable clock; logs are captured.
 * `storage`: another instance's database instead (a restart with other settings); it stays open on close.
 */
export async function buildTestApp(
  options: { env?: Record<string, string>; clock?: TestClock; withDb?: (db: Kysely<Database>) => Kysely<Database>; storage?: Storage } = {},
): Promise<TestApp> {
  const { storage, drop } = options.storage ? { storage: options.storage, drop: undefined } : await createTestStorage();
  const config = testConfig(options.env);
  const clock = options.clock ?? new TestClock();
  const logs: string[] = [];
  // `withDb` lets a test see the statements the app sends (a Kysely plugin); the test's own `db` is the plain one.
  const appStorage = options.withDb ? { ...storage, db: options.withDb(storage.db) } : storage;
  const app = await buildApp(config, { storage: appStorage, clock, logStream: { write: (line) => void logs.push(line) } });
  await app.ready();
  return {
    app,
    db: storage.db,
    storage,
    clock,
    config,
    logs,
    close: async () => {
      await app.close();
      if (!drop) return;
      await storage.close();
      await drop();
    },
  };
}
