import { resolve } from 'node:path';
import { migrationsFor } from '../../migrations/index.js';
import type { ResolvedConfig } from '../config.js';
import { SecretBox } from '../shared/crypto.js';
import {
  type BackupContents,
  BackupError,
  postgresBackup,
  postgresBackupContents,
  postgresContents,
  postgresRestore,
  sqliteBackup,
  sqliteBackupContents,
  sqliteContents,
  sqliteRestore,
} from '../storage/backup.js';
import type { CliResult } from './listing.js';

/**
 * `gatehouse backup FILE` and `gatehouse restore FILE` (docs/operations/backup.md). A backup holds
 * password hashes, sealed private keys and token hashes, but never SECRET_KEY, which seals them: both
 * commands say so, and restore refuses a backup whose signing keys do not open with the SECRET_KEY given.
 */

/** Where SECRET_KEY came from, for the reminder: the environment, or the development key file. */
const secretKeySource = (env: Record<string, string | undefined>, config: ResolvedConfig) =>
  env.SECRET_KEY ? 'SECRET_KEY (from the environment)' : `the development SECRET_KEY in ${resolve(config.dataDir, 'secret.key')}`;

/** A Gatehouse database at a migration this version knows: every one of its migrations is ours (a newer version's backup is refused). */
function checkMigrations(contents: BackupContents, what: string, dialect: 'sqlite' | 'postgres'): string {
  if (!contents.migrations || contents.migrations.length === 0) throw new BackupError(`${what} is not a Gatehouse database (no migrations table)`);
  const known = new Set(Object.keys(migrationsFor(dialect)));
  const unknown = contents.migrations.filter((name) => !known.has(name));
  if (unknown.length) throw new BackupError(`${what} was made by a newer Gatehouse (migrations this version does not know: ${unknown.join(', ')}): restore it with that version`);
  return contents.migrations[contents.migrations.length - 1]!;
}

/** The backed-up signing keys must open with this SECRET_KEY, or the restored server could not sign anything. */
function checkSecretKey(contents: BackupContents, config: ResolvedConfig, keySource: string): void {
  if (!contents.sealedKey) return;
  try {
    new SecretBox(config.secretKey, 'signing-keys').open(contents.sealedKey);
  } catch {
    throw new BackupError(
      `the signing keys in this backup do not open with ${keySource}: a restore needs the SECRET_KEY the backed-up instance ran with (it is not in the backup). Set it and run restore again`,
    );
  }
}

const isSqlite = (config: ResolvedConfig) => config.databaseUrl.startsWith('sqlite:');

export async function backup(config: ResolvedConfig, env: Record<string, string | undefined>, file: string | undefined): Promise<CliResult> {
  if (!file) throw new BackupError('name the backup file: gatehouse backup FILE');
  const dialect = isSqlite(config) ? 'sqlite' : 'postgres';
  const live = dialect === 'sqlite' ? sqliteContents(config.databaseUrl) : await postgresContents(config.databaseUrl);
  checkMigrations(live, 'the database of DATABASE_URL', dialect);
  let bytes: number;
  let migration: string;
  if (dialect === 'sqlite') {
    const written = await sqliteBackup(config.databaseUrl, file);
    bytes = written.bytes;
    migration = checkMigrations(written, 'the copy', dialect);
  } else {
    ({ bytes } = await postgresBackup(config.databaseUrl, file));
    migration = checkMigrations(await postgresBackupContents(file), 'the dump', dialect);
  }
  const keySource = secretKeySource(env, config);
  return {
    json: { file: resolve(file), bytes, dialect, migration, secret_key_included: false },
    lines: [
      `Backup written: ${resolve(file)} (${bytes} bytes, ${dialect}, migration ${migration}).`,
      'It holds password hashes, sealed private keys and token hashes: store it as you store secrets (the file is readable by its owner only).',
      `It does NOT hold ${keySource}. A restore needs that key: keep it safe apart from the backup, or the backup cannot be used.`,
    ],
  };
}

export async function restore(config: ResolvedConfig, env: Record<string, string | undefined>, file: string | undefined, replace: boolean): Promise<CliResult> {
  if (!file) throw new BackupError('name the backup file: gatehouse restore FILE');
  const keySource = secretKeySource(env, config);
  let migration: string;
  if (isSqlite(config)) {
    const contents = sqliteBackupContents(file);
    migration = checkMigrations(contents, file, 'sqlite');
    checkSecretKey(contents, config, keySource);
    await sqliteRestore(file, config.databaseUrl, replace);
  } else {
    if (replace) throw new BackupError('--force is for SQLite only: on PostgreSQL, restore into a new, empty database (createdb)');
    const contents = await postgresBackupContents(file);
    migration = checkMigrations(contents, file, 'postgres');
    checkSecretKey(contents, config, keySource);
    await postgresRestore(file, config.databaseUrl, contents.dumpedFromMajor);
  }
  return {
    json: { file: resolve(file), migration },
    lines: [
      `Restored ${resolve(file)} (migration ${migration}) into the database of DATABASE_URL.`,
      `Start the servers with the same ${keySource.startsWith('SECRET_KEY') ? 'SECRET_KEY' : 'development key file'}; they apply newer migrations on start.`,
    ],
  };
}
