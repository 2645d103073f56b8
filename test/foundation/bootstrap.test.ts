import { afterEach, describe, expect, it } from 'vitest';
import { BOOTSTRAP_DEVELOPER_EMAIL, DEMO_APP_NAME, firstStartNotice, runFirstStart } from '../../src/bootstrap.js';
import { hashSecret } from '../../src/shared/ids.js';
import { migrateToLatest } from '../../src/storage/migrator.js';
import { findApp } from '../../src/storage/repos/apps.js';
import { createTestStorage, testConfig } from '../helpers/app.js';

describe('first start (docs/guides/run-and-test.md#run-it)', () => {
  const cleanups: Array<() => Promise<void>> = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0)) await cleanup();
  });

  async function freshDatabase() {
    const { storage, drop } = await createTestStorage();
    await migrateToLatest(storage);
    cleanups.push(async () => {
      await storage.close();
      await drop();
    });
    return storage.db;
  }

  const noAdmin = testConfig({ ADMIN_TOKEN: '', BASE_URL: 'http://localhost:4000' });

  it('creates the bootstrap developer and the public demo app once', async () => {
    const db = await freshDatabase();
    const created = await runFirstStart(db, noAdmin, 1_800_000_000);
    expect(created).not.toBeNull();
    const developer = await db.selectFrom('developers').selectAll().executeTakeFirstOrThrow();
    expect(developer).toMatchObject({ id: created!.developerId, email: BOOTSTRAP_DEVELOPER_EMAIL, api_key_hash: hashSecret(created!.apiKey) });
    expect(await findApp(db, created!.demoClientId)).toMatchObject({
      name: DEMO_APP_NAME,
      type: 'public',
      developerId: developer.id,
      redirectUris: ['http://localhost:4000/demo/callback'],
      features: { auth: true, profile: true },
    });
    const notice = firstStartNotice(created!, noAdmin);
    for (const line of [
      `Bootstrap developer: ${created!.developerId} (${BOOTSTRAP_DEVELOPER_EMAIL})`,
      `Bootstrap developer API key (shown once, store it now): ${created!.apiKey}`,
      `Console: http://localhost:4000/console (first sign-in with your account: ${created!.consoleInvitation}, once)`,
      `Demo app client_id: ${created!.demoClientId} (open http://localhost:4000/demo)`,
      'Dev mailbox (mail is not sent while SMTP_URL is unset): http://localhost:4000/dev/mailbox',
    ]) {
      expect(notice).toContain(line);
    }
    // Only what the instance serves: no mailbox with SMTP_URL, no demo or mailbox in production.
    expect(firstStartNotice(created!, testConfig({ SMTP_URL: 'smtp://mail.test' }))).not.toContain('/dev/mailbox');
    const production = firstStartNotice(created!, testConfig({ NODE_ENV: 'production', BASE_URL: 'https://auth.test' }));
    expect(production).toContain('Console: https://auth.test/console');
    expect(production).not.toMatch(/\/demo|\/dev\/mailbox/);
    // The console invitation of the bootstrap developer, printed once with the key.
    expect(created!.consoleInvitation).toMatch(/^http:\/\/localhost:4000\/console\/invitation\?token=inv_/);

    expect(await runFirstStart(db, noAdmin, 1_800_000_001)).toBeNull();
    expect(await db.selectFrom('developers').selectAll().execute()).toHaveLength(1);
    expect(await db.selectFrom('apps').selectAll().execute()).toHaveLength(1);
  });

  it('is safe when several processes start together: exactly one wins', async () => {
    const db = await freshDatabase();
    const results = await Promise.all(Array.from({ length: 4 }, () => runFirstStart(db, noAdmin, 1_800_000_000)));
    expect(results.filter((r) => r !== null)).toHaveLength(1);
    expect(await db.selectFrom('developers').selectAll().execute()).toHaveLength(1);
    expect(await db.selectFrom('apps').selectAll().execute()).toHaveLength(1);
  });

  it('does nothing when ADMIN_TOKEN is set', async () => {
    const db = await freshDatabase();
    expect(await runFirstStart(db, testConfig(), 1_800_000_000)).toBeNull();
    expect(await db.selectFrom('developers').selectAll().execute()).toHaveLength(0);
  });

  it('does nothing once any developer exists', async () => {
    const db = await freshDatabase();
    await db.insertInto('developers').values({ id: 'dev_x', email: 'x@example.com', name: 'X', api_key_hash: 'h', created_at: 1 }).execute();
    expect(await runFirstStart(db, noAdmin, 1_800_000_000)).toBeNull();
    expect(await db.selectFrom('apps').selectAll().execute()).toHaveLength(0);
  });
});
