import { describe, expect, it } from 'vitest';
import { migrateToLatest } from '../../src/storage/migrator.js';
import { createTestStorage } from '../helpers/app.js';

const TABLES = [
  'developers', 'apps', 'users', 'provider_identities', 'app_users', 'consents', 'browser_sessions', 'grants',
  'authorization_codes', 'refresh_tokens', 'one_time_tokens', 'profiles', 'legal_documents', 'legal_versions',
  'legal_views', 'legal_acceptances', 'events', 'outbox', 'signing_keys', 'throttle_counters', 'settings',
];

describe('migrations', () => {
  it('create every table on an empty database, and a second run applies nothing', async () => {
    const { storage, drop } = await createTestStorage();
    try {
      const applied = await migrateToLatest(storage);
      expect(applied.length).toBeGreaterThan(0);
      const tables = (await storage.db.introspection.getTables()).map((table) => table.name);
      expect(tables).toEqual(expect.arrayContaining(TABLES));
      expect(await migrateToLatest(storage)).toEqual([]);
    } finally {
      await storage.close();
      await drop();
    }
  });
});
