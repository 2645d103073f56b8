import { Migrator } from 'kysely';
import { describe, expect, it } from 'vitest';
import { migrationsFor } from '../../migrations/index.js';
import { createTestStorage } from '../helpers/app.js';

/**
 * The migration that scopes passkeys to the app that registered them: what an earlier version's API
 * door registered (its `passkey.registered` event says `via: "api"`) becomes an app passkey, recovery
 * codes that no longer back up an account-wide factor go, and so do unconfirmed authenticator-app
 * secrets; account-wide passkeys and the codes beside them stay.
 */
describe('migration 2026-12-07T1000_app_scoped_passkeys', () => {
  it('scopes the API door\'s passkeys, keeps the account page\'s, and drops codes and secrets that back up nothing', async () => {
    const { storage, drop } = await createTestStorage();
    try {
      const migrations = migrationsFor(storage.dialect);
      const migrator = new Migrator({ db: storage.db, provider: { getMigrations: async () => migrations } });
      const before = await migrator.migrateTo('2026-11-24T1400_developer_console');
      expect(before.error).toBeUndefined();

      const db = storage.db;
      await db.insertInto('developers').values({ id: 'dev_1', email: 'dev@example.com', name: 'Dev', api_key_hash: 'h', created_at: 1 } as never).execute();
      await db
        .insertInto('apps')
        .values({
          id: 'app_a', developer_id: 'dev_1', name: 'A', type: 'public', client_secret_hash: null, redirect_uris: '[]', allowed_origins: '[]',
          feature_auth: 1, feature_profile: 0, required_fields: '[]', mfa: 'optional', disabled: 0, created_at: 1, updated_at: 1,
        } as never)
        .execute();
      for (const id of ['usr_api', 'usr_account', 'usr_totp']) {
        await db.insertInto('users').values({ id, email: `${id}@example.com`, email_verified: 1, status: 'active', created_at: 1, updated_at: 1 } as never).execute();
      }
      const passkey = (id: string, userId: string) => ({
        id, credential_id: `cred_${id}`, user_id: userId, public_key: 'pk', counter: 0, transports: '[]', device_type: 'singleDevice', backed_up: 0, name: id, created_at: 1, last_used_at: null,
      });
      await db.insertInto('passkeys').values([passkey('pk_api', 'usr_api'), passkey('pk_account', 'usr_account')] as never).execute();
      await db
        .insertInto('events')
        .values([
          { id: 'ev_1', type: 'passkey.registered', app_id: 'app_a', user_id: 'usr_api', ip: null, user_agent: null, at: 1, data: JSON.stringify({ passkey_id: 'pk_api', via: 'api' }) },
          { id: 'ev_2', type: 'passkey.registered', app_id: null, user_id: 'usr_account', ip: null, user_agent: null, at: 1, data: JSON.stringify({ passkey_id: 'pk_account', via: 'account' }) },
          { id: 'ev_3', type: 'passkey.registered', app_id: 'app_a', user_id: 'usr_api', ip: null, user_agent: null, at: 1, data: 'not json' },
        ] as never)
        .execute();
      const codes = (userId: string) => [1, 2].map((n) => ({ code_hash: `${userId}_${n}`, user_id: userId, created_at: 1, used_at: null }));
      await db.insertInto('recovery_codes').values([...codes('usr_api'), ...codes('usr_account'), ...codes('usr_totp')] as never).execute();
      await db
        .insertInto('totp_factors')
        .values([
          { user_id: 'usr_totp', secret_sealed: 'confirmed', confirmed_at: 1, last_step: null, created_at: 1 },
          { user_id: 'usr_api', secret_sealed: 'planted', confirmed_at: null, last_step: null, created_at: 1 },
        ] as never)
        .execute();

      const after = await migrator.migrateToLatest();
      expect(after.error).toBeUndefined();
      expect(after.results?.map((r) => r.migrationName)).toContain('2026-12-07T1000_app_scoped_passkeys');

      const scoped = await db.selectFrom('passkeys').select(['id', 'app_id']).orderBy('id').execute();
      expect(scoped).toEqual([
        { id: 'pk_account', app_id: null },
        { id: 'pk_api', app_id: 'app_a' },
      ]);
      const left = await db.selectFrom('recovery_codes').select('user_id').orderBy('code_hash').execute();
      expect(left.map((r) => r.user_id)).toEqual(['usr_account', 'usr_account', 'usr_totp', 'usr_totp']);
      expect(await db.selectFrom('totp_factors').select(['user_id', 'secret_sealed']).execute()).toEqual([{ user_id: 'usr_totp', secret_sealed: 'confirmed' }]);
    } finally {
      await storage.close();
      await drop();
    }
  });
});
