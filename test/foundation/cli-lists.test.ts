import { describe, expect, it } from 'vitest';
import { appList, developerList, resolveDeveloper, userList } from '../../src/cli/listing.js';
import { AppError } from '../../src/errors.js';
import { recordAppSignIn } from '../../src/storage/repos/app-users.js';
import { TEST_DIALECT, useMigratedTestStorage } from '../helpers/app.js';
import { insertTestUser, makeApp, makeDeveloper } from '../helpers/factories.js';

/**
 * The CLI's list commands and the `--developer` default, in-process against a real database (the
 * process wrapper is covered by test/foundation/cli.test.ts).
 */
describe('CLI lists and the --developer default', () => {
  const database = useMigratedTestStorage();

  const failure = async (promise: Promise<unknown>): Promise<AppError> => {
    const error = await promise.then(() => undefined, (e: unknown) => e);
    expect(error).toBeInstanceOf(AppError);
    return error as AppError;
  };

  it('--developer: says how to create one when there is none, defaults to the only one, names the choices when there are several', async () => {
    const db = database.storage.db;
    expect((await failure(resolveDeveloper(db, undefined))).publicMessage).toMatch(/gatehouse developer create --email/);
    const first = await makeDeveloper(db, { email: 'first@example.com', createdAt: 1_800_000_000 });
    expect((await resolveDeveloper(db, undefined)).id).toBe(first.id);
    const second = await makeDeveloper(db, { email: 'second@example.com', createdAt: 1_800_000_100 });
    const several = await failure(resolveDeveloper(db, undefined));
    expect(several.publicMessage).toBe('There are 2 developers: choose one with --developer ID.');
    expect(several.details).toEqual([
      { path: '--developer', message: `${second.id} (second@example.com)` },
      { path: '--developer', message: `${first.id} (first@example.com)` },
    ]);
    expect((await resolveDeveloper(db, first.id)).id).toBe(first.id);
    expect(await failure(resolveDeveloper(db, 'dev_missing'))).toMatchObject({ code: 'not_found' });

    const app = await makeApp(db, { developerId: first.id, name: 'Shop', redirectUris: ['https://shop.example/cb'] });
    const developers = await developerList(db);
    expect(developers.json).toEqual({
      items: [
        { id: second.id, email: 'second@example.com', name: 'Test developer', created_at: '2027-01-15T08:01:40.000Z', app_count: 0 },
        { id: first.id, email: 'first@example.com', name: 'Test developer', created_at: '2027-01-15T08:00:00.000Z', app_count: 1 },
      ],
    });
    expect(developers.lines[0]).toMatch(/^ID\s+EMAIL\s+NAME\s+APPS\s+CREATED$/);
    expect(developers.lines[2]).toMatch(new RegExp(`^${first.id}\\s+first@example.com\\s+Test developer\\s+1\\s+2027-01-15 08:00$`));

    const all = await appList(db, undefined);
    expect(all.json).toEqual({ items: [expect.objectContaining({ client_id: app.id, name: 'Shop', type: 'public', developer_id: first.id, redirect_uris: ['https://shop.example/cb'] })] });
    expect(all.lines[1]).toMatch(new RegExp(`^${app.id}\\s+Shop\\s+public\\s+${first.id}\\s+active\\s+https://shop.example/cb$`));
    expect((await appList(db, second.id)).lines).toEqual(['(none)']);
    expect(await failure(appList(db, 'dev_missing'))).toMatchObject({ code: 'not_found' });
  });

  it('user list: an app\'s users with their last sign-in, or every user; filters checked like the API', async () => {
    const db = database.storage.db;
    const app = await makeApp(db, { name: 'Listed' });
    const ann = await insertTestUser(db, { email: 'ann@example.com', name: 'Ann', email_verified: 1 }, 1_800_000_000);
    await insertTestUser(db, { email: 'bob@example.com', status: 'disabled' }, 1_800_000_001);
    await recordAppSignIn(db, app.id, ann.id, 1_800_000_500);

    const members = await userList(db, TEST_DIALECT, { app: app.id });
    expect(members.json).toMatchObject({ items: [{ id: ann.id, email: 'ann@example.com', status: 'active', email_verified: true, last_login_at: '2027-01-15T08:08:20.000Z' }], page: 1, pageSize: 20, total: 1 });
    expect(members.lines[0]).toMatch(/^ID\s+EMAIL\s+NAME\s+STATUS\s+VERIFIED\s+LAST_SIGN_IN$/);
    expect(members.lines[1]).toMatch(new RegExp(`^${ann.id}\\s+ann@example.com\\s+Ann\\s+active\\s+yes\\s+2027-01-15 08:08$`));
    expect(members.lines.at(-1)).toBe('Page 1 (20 per page) of 1 user.');

    const disabled = await userList(db, TEST_DIALECT, { status: 'disabled', search: 'BOB' });
    expect(disabled.json).toMatchObject({ items: [{ email: 'bob@example.com', status: 'disabled', email_verified: false }], total: 1 });
    expect((await userList(db, TEST_DIALECT, { pageSize: '1' })).json).toMatchObject({ pageSize: 1, total: 2 });

    expect((await failure(userList(db, TEST_DIALECT, { pageSize: '500' }))).details).toEqual([{ path: '--page-size', message: expect.any(String) }]);
    expect((await failure(userList(db, TEST_DIALECT, { app: app.id, status: 'gone' }))).details?.[0]?.path).toBe('--status');
    expect(await failure(userList(db, TEST_DIALECT, { app: 'app_missing' }))).toMatchObject({ code: 'not_found' });
  });
});
