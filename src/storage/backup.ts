import { execFile } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { chmodSync, closeSync, existsSync, openSync, renameSync, rmSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { promisify } from 'node:util';
import SQLite from 'better-sqlite3';
import pg from 'pg';

/**
 * The database side of `gatehouse backup` and `gatehouse restore` (docs/operations/backup.md): an online
 * copy of a SQLite file through SQLite's backup API, `pg_dump`/`pg_restore` for PostgreSQL, and what a
 * backup holds (its migrations and one sealed signing key) so the CLI can check it before restoring.
 */

const run = promisify(execFile);

/** What a backup (or a live database) says about itself. */
export interface BackupContents {
  /** The names in `kysely_migration`, in order; null when the table is missing (not a Gatehouse database). */
  migrations: string[] | null;
  /** One sealed private signing key (`signing_keys.private_jwk`), to check SECRET_KEY opens it; null when there is none. */
  sealedKey: string | null;
}

/** A refusal the operator can act on (the CLI prints the message and exits 1). */
export class BackupError extends Error {}

/** A backup file is written beside its final name and renamed into place only when complete: no half backup carries the name. */
function partialName(file: string): string {
  return join(dirname(file), `.${randomBytes(6).toString('hex')}.partial`);
}

/** Creates `file` empty and readable by its owner only (a backup holds password hashes and sealed keys); refuses an existing one. */
function createPrivateFile(file: string): void {
  try {
    closeSync(openSync(file, 'wx', 0o600));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'EEXIST') throw new BackupError(`${file} already exists: choose a new file name (a backup never overwrites one)`);
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') throw new BackupError(`the directory of ${file} does not exist`);
    throw error;
  }
}

// SQLite --------------------------------------------------------------------------------------------

const sqlitePath = (url: string) => url.slice('sqlite:'.length);

function readContents(database: SQLite.Database): BackupContents {
  const hasTable = (name: string) => database.prepare(`select 1 from sqlite_master where type = 'table' and name = ?`).get(name) !== undefined;
  const migrations = hasTable('kysely_migration')
    ? (database.prepare('select name from kysely_migration order by name').all() as Array<{ name: string }>).map((r) => r.name)
    : null;
  const key = hasTable('signing_keys') ? (database.prepare('select private_jwk from signing_keys limit 1').get() as { private_jwk: string } | undefined) : undefined;
  return { migrations, sealedKey: key?.private_jwk ?? null };
}

/** Opens a file that should be a SQLite database; a file that is not one fails here with a clear message. */
function openSqlite(file: string, readonly: boolean): SQLite.Database {
  let database: SQLite.Database | undefined;
  try {
    database = new SQLite(file, { fileMustExist: true, readonly, timeout: 5000 });
    database.prepare('select count(*) from sqlite_master').get();
    return database;
  } catch (error) {
    database?.close();
    const code = (error as { code?: string }).code;
    if (code === 'SQLITE_NOTADB' || code === 'SQLITE_CORRUPT') throw new BackupError(`${file} is not a SQLite database`);
    if (code === 'SQLITE_CANTOPEN') throw new BackupError(`${file} cannot be opened (missing, or no permission)`);
    throw error;
  }
}

/** What the live SQLite database of DATABASE_URL holds. */
export function sqliteContents(url: string): BackupContents {
  const database = openSqlite(sqlitePath(url), false);
  try {
    return readContents(database);
  } finally {
    database.close();
  }
}

/**
 * An online, consistent copy of a SQLite database while servers keep writing to it. Every backup step
 * copies all pages at once: one step is one read transaction, which in WAL mode does not block writers,
 * so the copy is one point in time (SQLite restarts a step-wise copy the source changed under, which
 * under steady writes might never finish). The copy is switched to rollback-journal mode, so the backup
 * is one self-contained file, and checked (`quick_check`) before it takes its name.
 */
export async function sqliteBackup(url: string, file: string): Promise<BackupContents & { bytes: number }> {
  createPrivateFile(file);
  const partial = partialName(file);
  let source: SQLite.Database | undefined;
  try {
    source = openSqlite(sqlitePath(url), false);
    createPrivateFile(partial);
    await source.backup(partial, { progress: () => 0x7fffffff });
    const copy = openSqlite(partial, false);
    let contents: BackupContents;
    try {
      copy.pragma('journal_mode = DELETE');
      const check = copy.pragma('quick_check', { simple: true });
      if (check !== 'ok') throw new BackupError(`the copy failed its integrity check: ${String(check)}`);
      contents = readContents(copy);
    } finally {
      copy.close();
    }
    chmodSync(partial, 0o600);
    renameSync(partial, file);
    return { ...contents, bytes: statSync(file).size };
  } catch (error) {
    rmSync(file, { force: true });
    throw error;
  } finally {
    source?.close();
    rmSync(partial, { force: true });
  }
}

/** What a SQLite backup file holds (read-only; a file that is not a SQLite database is refused). */
export function sqliteBackupContents(file: string): BackupContents {
  const database = openSqlite(file, true);
  try {
    const check = database.pragma('quick_check', { simple: true });
    if (check !== 'ok') throw new BackupError(`${file} is damaged: ${String(check)}`);
    return readContents(database);
  } finally {
    database.close();
  }
}

/**
 * Whether another connection has the SQLite file open: in WAL mode every open connection holds a shared
 * lock on the file, so an exclusive lock taken without waiting fails while a server (idle or not) runs.
 */
function sqliteInUse(file: string): boolean {
  const database = openSqlite(file, false);
  try {
    database.pragma('busy_timeout = 0');
    database.pragma('locking_mode = EXCLUSIVE');
    database.exec('BEGIN EXCLUSIVE');
    database.exec('COMMIT');
    return false;
  } catch (error) {
    if ((error as { code?: string }).code === 'SQLITE_BUSY') return true;
    throw error;
  } finally {
    database.close();
  }
}

/**
 * Restores a checked SQLite backup as the database of DATABASE_URL. The target must not exist, or, with
 * `replace`, must not be open anywhere (servers stopped). The backup is copied beside the target and
 * renamed over it; the old file's WAL and shared-memory files go with it.
 */
export async function sqliteRestore(file: string, url: string, replace: boolean): Promise<void> {
  const target = sqlitePath(url);
  if (target === ':memory:') throw new BackupError('DATABASE_URL names an in-memory database: restore into a file');
  if (existsSync(target)) {
    if (!replace) throw new BackupError(`${target} already exists: restore into a new file, or stop every server on it and pass --force to replace it`);
    if (sqliteInUse(target)) throw new BackupError(`${target} is in use (a server has it open): stop every server on it first`);
  } else if (!existsSync(dirname(target))) {
    throw new BackupError(`the directory of ${target} does not exist`);
  }
  const partial = partialName(target);
  const backup = openSqlite(file, true);
  try {
    createPrivateFile(partial);
    await backup.backup(partial, { progress: () => 0x7fffffff });
    rmSync(`${target}-wal`, { force: true });
    rmSync(`${target}-shm`, { force: true });
    renameSync(partial, target);
  } finally {
    backup.close();
    rmSync(partial, { force: true });
  }
}

// PostgreSQL ----------------------------------------------------------------------------------------

/** libpq's environment for a connection URL: the password stays out of the command line (`ps` shows it to every user). */
export function libpqEnv(url: string): Record<string, string> {
  const parsed = new URL(url);
  const env: Record<string, string> = {};
  if (parsed.hostname) env.PGHOST = decodeURIComponent(parsed.hostname.replace(/^\[(.*)\]$/, '$1'));
  if (parsed.port) env.PGPORT = parsed.port;
  if (parsed.username) env.PGUSER = decodeURIComponent(parsed.username);
  if (parsed.password) env.PGPASSWORD = decodeURIComponent(parsed.password);
  const database = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (database) env.PGDATABASE = database;
  const known: Record<string, string> = {
    sslmode: 'PGSSLMODE',
    sslrootcert: 'PGSSLROOTCERT',
    sslcert: 'PGSSLCERT',
    sslkey: 'PGSSLKEY',
    host: 'PGHOST',
    port: 'PGPORT',
    user: 'PGUSER',
    password: 'PGPASSWORD',
    application_name: 'PGAPPNAME',
    options: 'PGOPTIONS',
    connect_timeout: 'PGCONNECT_TIMEOUT',
  };
  for (const [name, value] of parsed.searchParams) {
    const variable = known[name];
    if (!variable) throw new BackupError(`DATABASE_URL parameter "${name}" is not one pg_dump/pg_restore understand: use libpq's names (sslmode, sslrootcert, …)`);
    env[variable] = value;
  }
  return env;
}

/** The major version of a PostgreSQL client tool (`pg_dump (PostgreSQL) 15.20 (Debian …)` → 15). */
async function toolMajor(tool: 'pg_dump' | 'pg_restore'): Promise<number> {
  let stdout: string;
  try {
    ({ stdout } = await run(tool, ['--version']));
  } catch {
    throw new BackupError(`${tool} was not found on PATH: install PostgreSQL's client tools (Debian: postgresql-client) of the server's major version`);
  }
  const match = /\(PostgreSQL\) (\d+)/.exec(stdout);
  if (!match) throw new BackupError(`${tool} --version printed an unknown version: ${stdout.trim()}`);
  return Number(match[1]);
}

/** The server's major version and what its database holds. */
async function postgresState(url: string): Promise<{ major: number; tables: number; contents: BackupContents }> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const version = await client.query<{ v: string }>('show server_version_num');
    const tables = await client.query<{ n: string }>(`select count(*)::int as n from pg_tables where schemaname = 'public'`);
    const has = await client.query<{ m: boolean; k: boolean }>(`select to_regclass('public.kysely_migration') is not null as m, to_regclass('public.signing_keys') is not null as k`);
    const migrations = has.rows[0]!.m ? (await client.query<{ name: string }>('select name from kysely_migration order by name')).rows.map((r) => r.name) : null;
    const key = has.rows[0]!.k ? (await client.query<{ private_jwk: string }>('select private_jwk from signing_keys limit 1')).rows[0] : undefined;
    return { major: Math.floor(Number(version.rows[0]!.v) / 10000), tables: Number(tables.rows[0]!.n), contents: { migrations, sealedKey: key?.private_jwk ?? null } };
  } finally {
    await client.end();
  }
}

/** What the live PostgreSQL database of DATABASE_URL holds. */
export async function postgresContents(url: string): Promise<BackupContents> {
  return (await postgresState(url)).contents;
}

/**
 * `pg_dump --format=custom` of the database of DATABASE_URL, after checking pg_dump is at least the
 * server's major version (an older pg_dump cannot read a newer server's catalogue). pg_dump takes one
 * consistent snapshot and does not block the servers' reads or writes.
 */
export async function postgresBackup(url: string, file: string): Promise<{ bytes: number; toolMajor: number; serverMajor: number }> {
  const [tool, state] = await Promise.all([toolMajor('pg_dump'), postgresState(url)]);
  if (tool < state.major) throw new BackupError(`pg_dump ${tool} is older than the server (PostgreSQL ${state.major}): install the client tools of major version ${state.major} or newer`);
  createPrivateFile(file);
  const partial = partialName(file);
  try {
    createPrivateFile(partial);
    await run('pg_dump', ['--format=custom', '--no-password', `--file=${partial}`], { env: { ...process.env, ...libpqEnv(url) }, maxBuffer: 16 * 1024 * 1024 }).catch((error: { stderr?: string }) => {
      throw new BackupError(`pg_dump failed: ${(error.stderr ?? String(error)).trim()}`);
    });
    renameSync(partial, file);
    return { bytes: statSync(file).size, toolMajor: tool, serverMajor: state.major };
  } catch (error) {
    rmSync(file, { force: true });
    throw error;
  } finally {
    rmSync(partial, { force: true });
  }
}

/** Rows of one table in a custom-format dump, from `pg_restore --data-only --table=T --file=-` (COPY text format). */
async function dumpedRows(file: string, table: string): Promise<Array<Record<string, string>>> {
  const { stdout } = await run('pg_restore', ['--data-only', `--table=${table}`, '--file=-', file], { maxBuffer: 64 * 1024 * 1024 });
  const lines = stdout.split('\n');
  const start = lines.findIndex((line) => line.startsWith(`COPY public.${table} (`));
  if (start < 0) return [];
  const columns = /\(([^)]*)\)/.exec(lines[start]!)![1]!.split(', ').map((c) => c.replace(/^"|"$/g, ''));
  const rows: Array<Record<string, string>> = [];
  for (const line of lines.slice(start + 1)) {
    if (line === '\\.') break;
    const values = line.split('\t');
    rows.push(Object.fromEntries(columns.map((c, i) => [c, values[i] ?? ''])));
  }
  return rows;
}

/** What a custom-format dump holds and which server major it was dumped from; a file that is not such a dump is refused. */
export async function postgresBackupContents(file: string): Promise<BackupContents & { dumpedFromMajor: number }> {
  await toolMajor('pg_restore');
  let list: string;
  try {
    ({ stdout: list } = await run('pg_restore', ['--list', file], { maxBuffer: 16 * 1024 * 1024 }));
  } catch {
    throw new BackupError(`${file} is not a pg_dump custom-format archive that this pg_restore can read`);
  }
  const from = /Dumped from database version: (\d+)/.exec(list);
  if (!from) throw new BackupError(`${file} does not say which PostgreSQL it was dumped from`);
  const hasData = (table: string) => new RegExp(`TABLE DATA public ${table} `).test(list);
  const migrations = hasData('kysely_migration') ? (await dumpedRows(file, 'kysely_migration')).map((r) => r.name!).sort() : null;
  const key = hasData('signing_keys') ? (await dumpedRows(file, 'signing_keys'))[0] : undefined;
  return { migrations, sealedKey: key?.private_jwk ?? null, dumpedFromMajor: Number(from[1]) };
}

/**
 * `pg_restore` of a checked dump into the database of DATABASE_URL, which must be empty (a new database:
 * `createdb`), in one transaction that stops at the first error: a failed restore leaves it empty.
 * Objects are owned by the restoring role (`--no-owner --no-privileges`), as the servers connect with it.
 */
export async function postgresRestore(file: string, url: string, dumpedFromMajor: number): Promise<void> {
  const state = await postgresState(url);
  if (state.tables > 0) throw new BackupError(`the database of DATABASE_URL is not empty (${state.tables} tables): restore into a new, empty database (createdb), never over a live one`);
  if (state.major < dumpedFromMajor) throw new BackupError(`the server is PostgreSQL ${state.major}, older than the ${dumpedFromMajor} the backup was dumped from: restore into ${dumpedFromMajor} or newer`);
  const env = libpqEnv(url);
  if (!env.PGDATABASE) throw new BackupError('DATABASE_URL names no database: name the new, empty database to restore into');
  await run('pg_restore', ['--exit-on-error', '--single-transaction', '--no-owner', '--no-privileges', '--no-password', `--dbname=${env.PGDATABASE}`, file], {
    env: { ...process.env, ...env },
    maxBuffer: 16 * 1024 * 1024,
  }).catch((error: { stderr?: string }) => {
    throw new BackupError(`pg_restore failed (nothing was restored): ${(error.stderr ?? String(error)).trim()}`);
  });
}
