import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { bearer } from '../helpers/dev-api.js';
import { insertTestUser } from '../helpers/factories.js';
import { Browser, csrfOf } from '../helpers/oauth-flows.js';
import { followShownOnce, postForm } from './console-helpers.js';

describe('console operator view (ADMIN_TOKEN)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t?.close());

  it('asks for the ADMIN_TOKEN, refuses a wrong one at the field, then manages developers and users', async () => {
    const browser = new Browser(t.app);
    const guarded = await browser.get('/console/operator/users');
    expect([guarded.statusCode, guarded.headers.location]).toEqual([303, '/console/operator']);
    const form = await browser.get('/console/operator');
    expect(form.statusCode).toBe(200);
    expect((await browser.post('/console/operator', { action: 'login', admin_token: TEST_ADMIN_TOKEN })).statusCode).toBe(403);
    const wrong = await browser.post('/console/operator', { csrf: csrfOf(form.body), action: 'login', admin_token: 'nope' });
    expect(wrong.statusCode).toBe(401);
    expect(wrong.body).toContain('id="admin_token-error"');
    expect((await browser.get('/console/operator/developers')).statusCode).toBe(303);
    const entered = await browser.post('/console/operator', { csrf: csrfOf(form.body), action: 'login', admin_token: TEST_ADMIN_TOKEN });
    expect([entered.statusCode, entered.headers.location]).toEqual([303, '/console/operator/developers']);

    // Developers: errors at the field, a new developer with its key (shown once), an invitation link.
    const page = '/console/operator/developers';
    const bad = await postForm(browser, page, page, { action: 'create', email: 'not-an-email', name: '' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toContain('id="email-error"');
    const posted = await postForm(browser, page, page, { action: 'create', email: 'ops@example.com', name: 'Ops' });
    const { page: created, secret: key } = await followShownOnce(browser, posted, page, 'api_key');
    expect((await t.app.inject({ method: 'GET', url: '/v1/dev/apps', headers: bearer(key) })).statusCode).toBe(200);
    const duplicate = await postForm(browser, page, page, { action: 'create', email: 'ops@example.com', name: '' });
    expect(duplicate.statusCode).toBe(409);
    expect(duplicate.body).toContain('id="email-error"');
    const developerId = /data-developer="([^"]+)"/.exec(created.body)![1]!;
    const { page: invited, secret: invitationUrl } = await followShownOnce(browser, await postForm(browser, page, page, { action: 'invite', developer_id: developerId }), page, 'invitation_url');
    expect(invitationUrl).toMatch(/^http:\/\/localhost:3000\/console\/invitation\?token=inv_/);
    expect(invited.body).not.toContain('Gatehouse platform');

    // Users platform-wide: search, disable, enable.
    const user = await insertTestUser(t.db, { email: 'someone@example.com' });
    const users = '/console/operator/users';
    const found = await browser.get(`${users}?q=someone&status=&action=search`);
    expect(found.body).toContain(`data-user="${user.id}"`);
    expect((await browser.get(`${users}?status=blocked`)).statusCode).toBe(400);
    const disabled = await postForm(browser, `${users}?q=someone`, users, { action: 'block', user_id: user.id, back: 'q=someone' });
    expect([disabled.statusCode, disabled.headers.location]).toEqual([303, `${users}?q=someone`]);
    expect((await t.db.selectFrom('users').select('status').where('id', '=', user.id).executeTakeFirstOrThrow()).status).toBe('disabled');
    await postForm(browser, `${users}?q=someone`, users, { action: 'unblock', user_id: user.id, back: '' });
    expect((await t.db.selectFrom('users').select('status').where('id', '=', user.id).executeTakeFirstOrThrow()).status).toBe('active');

    // Leaving the operator view ends it for this session.
    const left = await postForm(browser, page, '/console/operator', { action: 'logout' });
    expect(left.statusCode).toBe(303);
    expect((await browser.get(page)).statusCode).toBe(303);
  });

  it('is closed when no ADMIN_TOKEN is set', async () => {
    const open = await buildTestApp({ env: { ADMIN_TOKEN: '' } });
    try {
      const browser = new Browser(open.app);
      const form = await browser.get('/console/operator');
      const refused = await browser.post('/console/operator', { csrf: csrfOf(form.body), action: 'login', admin_token: '' });
      expect(refused.statusCode).toBe(401);
      expect((await browser.get('/console/operator/developers')).statusCode).toBe(303);
    } finally {
      await open.close();
    }
  });

  it('ends when ADMIN_TOKEN is rotated or removed (re-checked on every request), and on its own after 4 hours', async () => {
    const base = await buildTestApp();
    const restarts: TestApp[] = [];
    try {
      const browser = new Browser(base.app);
      const form = await browser.get('/console/operator');
      await browser.post('/console/operator', { csrf: csrfOf(form.body), action: 'login', admin_token: TEST_ADMIN_TOKEN });
      const page = '/console/operator/developers';
      expect((await browser.get(page)).statusCode).toBe(200);
      // The session keeps a keyed fingerprint, never the token itself.
      const rows = await base.db.selectFrom('browser_sessions').select('data').execute();
      expect(rows.some((r) => r.data.includes('fingerprint'))).toBe(true);
      expect(rows.some((r) => r.data.includes(TEST_ADMIN_TOKEN))).toBe(false);

      // The same browser after a restart with a new token, and with none: refused, and nothing is created.
      for (const env of [{ ADMIN_TOKEN: 'a-new-admin-token-0123456789abcdef-rotated' }, { ADMIN_TOKEN: '' }]) {
        const restarted = await buildTestApp({ env, storage: base.storage, clock: base.clock });
        restarts.push(restarted);
        const same = new Browser(restarted.app);
        for (const [name, value] of browser.jar.cookies) same.jar.cookies.set(name, value);
        const guarded = await same.get(page);
        expect([guarded.statusCode, guarded.headers.location]).toEqual([303, '/console/operator']);
        const csrf = csrfOf((await same.get('/console/operator')).body);
        const create = await same.post(page, { csrf, action: 'create', email: 'stale@example.com', name: '' });
        expect(create.statusCode).toBe(303);
        expect(await base.db.selectFrom('developers').select('id').where('email', '=', 'stale@example.com').executeTakeFirst()).toBeUndefined();
      }

      // Positive control: with the token it was given for, the session still works — for 4 hours.
      expect((await browser.get(page)).statusCode).toBe(200);
      base.clock.advance(4 * 3600);
      expect((await browser.get(page)).statusCode).toBe(303);
    } finally {
      for (const r of restarts) await r.close();
      await base.close();
    }
  });
});
