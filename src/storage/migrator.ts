import { Migrator } from 'kysely';
import { migrationsFor } from '../../migrations/index.js';
import type { Storage } from './connect.js';

/**
 * Brings the schema to the latest migration. On PostgreSQL, Kysely's migrator holds a transaction-level
 * advisory lock while it runs, so any number of instances starting together migrate exactly once.
 */
export async function migrateToLatest(storage: Storage): Promise<string[]> {
  const migrations = migrationsFor(storage.dialect);
  const migrator = new Migrator({ db: storage.db, provider: { getMigrations: async () => migrations } });
  const { error, results } = await migrator.migrateToLatest();
  if (error) throw error instanceof Error ? error : new Error(String(error));
  return (results ?? []).filter((r) => r.status === 'Success').map((r) => r.migrationName);
}
