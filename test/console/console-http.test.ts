import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders, bearer } from '../helpers/dev-api.js';
import { makeApp } from '../helpers/factories.js';
import { Browser, csrfOf, uniqueEmail } from '../helpers/oauth-flows.js';
import { consoleSignIn, developerBrowser, followShownOnce, postForm } from './console-helpers.js';

describe('developer console (HTTP)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t?.close());

  it('sends a visitor who is not signed in to the console sign-in, which goes through /oauth/authorize as the console app', async () => {
    const browser = new Browser(t.app);
    const res = await browser.get('/console/apps/app_x/users?q=a');
    expect(res.statusCode).toBe(303);
    expect(res.headers.location).toBe('/console/login?return=%2Fconsole%2Fapps%2Fapp_x%2Fusers%3Fq%3Da');
    const login = await browser.get(String(res.headers.location));
    expect(login.statusCode).toBe(303);
    const authorize = new URL(String(login.headers.location));
    expect(authorize.pathname).toBe('/oauth/authorize');
    expect(authorize.searchParams.get('client_id')).toBe('app_gatehouse_console');
    expect(authorize.searchParams.get('code_challenge_method')).toBe('S256');
    expect(browser.jar.cookies.has('gh_console')).toBe(true);
    const hosted = await browser.get(relative(authorize));
    expect(hosted.statusCode).toBe(302);
    expect(String(hosted.headers.location)).toMatch(/\/login\?/);
    // A callback that is not the answer to this browser's sign-in, or a refused one, signs nobody in.
    const forged = await browser.get('/console/callback?code=abc&state=forged');
    expect(forged.statusCode).toBe(400);
    expect(forged.body).toContain('Sign in again');
    const denied = await browser.get(`/console/callback?error=access_denied&state=${authorize.searchParams.get('state')}`);
    expect(denied.statusCode).toBe(400);
    expect(denied.body).toContain('cancelled or refused');
    expect((await browser.get('/console')).statusCode).toBe(303);
    // The platform's own developer and app are never listed.
    const developers = await t.app.inject({ method: 'GET', url: '/v1/admin/developers', headers: adminHeaders });
    expect(developers.json().items).toEqual([]);
  });

  it('signs a developer in (linked by verified email), with its own cookie and the hosted security headers', async () => {
    const { browser, developer } = await developerBrowser(t);
    expect(await consoleSignIn(browser)).toBe('200 /console');
    const page = await browser.get('/console');
    expect(page.statusCode).toBe(200);
    expect(page.headers['content-security-policy']).toContain("frame-ancestors 'none'");
    expect(page.headers['cache-control']).toBe('no-store');
    expect(page.body).toContain('name="redirect_uris"');
    const row = await t.db.selectFrom('developers').select('user_id').where('id', '=', developer.id).executeTakeFirstOrThrow();
    expect(row.user_id).not.toBeNull();
    // No consent screen for the platform's own app: the consent is recorded as implied.
    const consent = await t.db.selectFrom('events').select('data').where('type', '=', 'consent.granted').where('user_id', '=', row.user_id!).where('app_id', '=', 'app_gatehouse_console').executeTakeFirstOrThrow();
    expect(JSON.parse(consent.data)).toMatchObject({ via: 'first_party' });
    // The console's own session cookie: HttpOnly, SameSite=Lax.
    const cookie = (await new Browser(t.app).get('/console/login')).cookies.find((c) => c.name === 'gh_console');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Lax', path: '/' });
  });

  it('creates, edits and deletes an app with errors at the field, and 404s for another developer’s app', async () => {
    const { browser } = await developerBrowser(t);
    await consoleSignIn(browser);
    // Bad inputs: a page with the errors at the fields, nothing created.
    const bad = await postForm(browser, '/console', '/console/apps', { action: 'create', name: '', type: 'public', redirect_uris: 'http://app.example/cb' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(/id="name-error"/);
    expect(bad.body).toMatch(/id="redirect_uris-error"[^>]*>line 1: http is only allowed for loopback hosts/);
    expect(bad.body).toContain('aria-invalid="true"');
    expect(await t.db.selectFrom('apps').select('id').where('developer_id', '!=', 'dev_gatehouse_platform').execute()).toHaveLength(0);
    // The same errors in Simplified Chinese: zod's own messages and the rules' messages.
    const consolePage = await browser.get('/console');
    const zh = await browser.post('/console/apps', { csrf: csrfOf(consolePage.body), action: 'create', name: '', type: 'public', redirect_uris: 'http://app.example/cb' }, { 'accept-language': 'zh-CN' });
    expect(zh.statusCode).toBe(400);
    expect(zh.body).toMatch(/id="redirect_uris-error"[^>]*>第 1 行：http 仅允许用于本机回环地址/);
    expect(zh.body).toMatch(/id="name-error"[^>]*>[^<]*[\u4e00-\u9fff]/);

    // POST → 303 → GET: the secret is shown once, and a reload makes no second app.
    const appsBefore = (await t.db.selectFrom('apps').select('id').execute()).length;
    const posted = await postForm(browser, '/console', '/console/apps', { action: 'create', name: 'Shop', type: 'confidential', redirect_uris: 'https://shop.example/cb', features: 'auth' });
    const clientId = /^\/console\/apps\/([^/?]+)$/.exec(String(posted.headers.location))?.[1] ?? '';
    const { page: created, secret } = await followShownOnce(browser, posted, `/console/apps/${clientId}`, 'client_secret');
    expect(/data-field="client_id">([^<]+)</.exec(created.body)![1]).toBe(clientId);
    expect(secret).toMatch(/^cs_/);
    expect((await t.db.selectFrom('apps').select('id').execute()).length).toBe(appsBefore + 1);

    const appUrl = `/console/apps/${clientId}`;
    const rotated = await followShownOnce(browser, await postForm(browser, appUrl, appUrl, { action: 'rotate_secret' }), appUrl, 'client_secret');
    expect(rotated.secret).toMatch(/^cs_/);
    expect(rotated.secret).not.toBe(secret);
    const badSave = await postForm(browser, appUrl, appUrl, { action: 'save', name: 'Shop', redirect_uris: 'https://shop.example/cb\njavascript://x', allowed_origins: 'nope' });
    expect(badSave.statusCode).toBe(400);
    expect(badSave.body).toMatch(/id="redirect_uris-error"[^>]*>line 2:/);
    expect(badSave.body).toMatch(/id="allowed_origins-error"/);
    const badBrand = await postForm(browser, appUrl, appUrl, { action: 'save', name: 'Shop', redirect_uris: 'https://shop.example/cb', logo_url: 'http://shop.example/logo.png', accent_color: 'red' });
    expect(badBrand.statusCode).toBe(400);
    expect(badBrand.body).toMatch(/id="logo_url-error"/);
    expect(badBrand.body).toMatch(/id="accent_color-error"/);
    const saved = await postForm(browser, appUrl, appUrl, {
      action: 'save',
      name: 'Shop 2',
      redirect_uris: 'https://shop.example/cb\r\nhttps://shop.example/cb2',
      allowed_origins: 'https://shop.example',
      required_fields: 'name',
      features: 'auth',
      mfa: 'optional',
      logo_url: 'https://shop.example/logo.svg',
      accent_color: '#0A7F3F',
    });
    expect(saved.statusCode).toBe(303);
    const stored = await t.db.selectFrom('apps').selectAll().where('id', '=', clientId).executeTakeFirstOrThrow();
    expect(JSON.parse(stored.redirect_uris)).toEqual(['https://shop.example/cb', 'https://shop.example/cb2']);
    expect(JSON.parse(stored.required_fields)).toEqual(['name']);
    expect(stored.name).toBe('Shop 2');
    // Branding, as the apps API has it (the form shows it back; an emptied field removes it).
    const brandedPage = await browser.get(appUrl);
    expect(brandedPage.body).toContain('value="https://shop.example/logo.svg"');
    expect(brandedPage.body).toContain('value="#0a7f3f"');
    const unbranded = await postForm(browser, appUrl, appUrl, { action: 'save', name: 'Shop 2', redirect_uris: 'https://shop.example/cb', features: 'auth', logo_url: '', accent_color: '' });
    expect(unbranded.statusCode).toBe(303);
    expect((await browser.get(appUrl)).body).not.toContain('shop.example/logo.svg');

    // Another developer: 404 on read and on change.
    const other = await developerBrowser(t);
    await consoleSignIn(other.browser);
    expect((await other.browser.get(appUrl)).statusCode).toBe(404);
    const otherPage = await other.browser.get('/console');
    const refused = await other.browser.post(`${appUrl}/delete`, { csrf: csrfOf(otherPage.body), action: 'delete' });
    expect(refused.statusCode).toBe(404);

    // Delete: a confirmation page first, then the deletion.
    const confirm = await browser.get(`${appUrl}/delete`);
    expect(confirm.body).toContain('value="delete"');
    const deleted = await browser.post(`${appUrl}/delete`, { csrf: csrfOf(confirm.body), action: 'delete' });
    expect(deleted.statusCode).toBe(303);
    expect(await t.db.selectFrom('apps').select('id').where('id', '=', clientId).executeTakeFirst()).toBeUndefined();
    const types = (await t.db.selectFrom('events').select('type').where('app_id', '=', clientId).orderBy('id').execute()).map((e) => e.type);
    expect(types).toEqual(['app.created', 'app.secret_rotated', 'app.updated', 'app.updated', 'app.deleted']);
  });

  it('refuses a form without the CSRF token or from another site, and changes nothing', async () => {
    const { browser } = await developerBrowser(t);
    await consoleSignIn(browser);
    const noToken = await browser.post('/console/apps', { action: 'create', name: 'X', type: 'public', redirect_uris: 'https://x.example/cb' });
    expect(noToken.statusCode).toBe(403);
    const page = await browser.get('/console');
    const crossSite = await browser.post('/console/apps', { csrf: csrfOf(page.body), action: 'create', name: 'X', type: 'public', redirect_uris: 'https://x.example/cb' }, { origin: 'https://evil.example' });
    expect(crossSite.statusCode).toBe(403);
    // The hosted session's token is not the console's.
    const hosted = await browser.get('/account');
    const wrongSession = await browser.post('/console/apps', { csrf: csrfOf(hosted.body), action: 'create', name: 'X', type: 'public', redirect_uris: 'https://x.example/cb' });
    expect(wrongSession.statusCode).toBe(403);
    // A JSON body of the wrong shapes, with the right token: the form's errors, not a 500.
    const json = await t.app.inject({
      method: 'POST',
      url: '/console/apps',
      headers: browser.jar.header(),
      payload: { csrf: csrfOf(page.body), action: 'create', name: 5, type: ['public'], redirect_uris: { a: 1 }, features: [1, 'auth'] },
    });
    expect(json.statusCode).toBe(400);
    expect(json.body).toContain('id="name-error"');
    expect(await t.db.selectFrom('apps').select('id').where('name', '=', 'X').execute()).toHaveLength(0);
  });

  it('shows a signed-in user who is no developer a page saying so', async () => {
    const browser = new Browser(t.app);
    await browser.register(uniqueEmail('plain'));
    expect(await consoleSignIn(browser)).toBe('403 /console');
    const page = await browser.get('/console');
    expect(page.statusCode).toBe(403);
    expect(page.body).toContain('not linked to a developer');
    expect((await browser.get('/console/keys')).statusCode).toBe(403);
  });

  it('on a development server on this machine, makes a signed-in account a developer in one click; from elsewhere offers nothing and refuses', async () => {
    const browser = new Browser(t.app);
    const email = uniqueEmail('newdev');
    await browser.register(email);
    expect(await consoleSignIn(browser)).toBe('403 /console');
    const page = await browser.get('/console');
    expect(page.body).toContain('value="become_developer"');

    // The same account asking from another machine: no button, and the door answers 404, creating nothing.
    const remote = { remoteAddress: '203.0.113.7', headers: browser.jar.header() };
    const fromElsewhere = await t.app.inject({ method: 'GET', url: '/console', ...remote });
    expect(fromElsewhere.statusCode).toBe(403);
    expect(fromElsewhere.body).not.toContain('become_developer');
    const refused = await t.app.inject({
      method: 'POST',
      url: '/console/become-developer',
      ...remote,
      headers: { ...remote.headers, 'content-type': 'application/x-www-form-urlencoded' },
      payload: new URLSearchParams({ csrf: csrfOf(page.body), action: 'become_developer' }).toString(),
    });
    expect(refused.statusCode).toBe(404);
    expect(await t.db.selectFrom('developers').select('id').where('email', '=', email).execute()).toHaveLength(0);

    const made = await browser.post('/console/become-developer', { csrf: csrfOf(page.body), action: 'become_developer' });
    expect([made.statusCode, made.headers.location]).toEqual([303, '/console']);
    expect((await browser.get('/console')).statusCode).toBe(200);
    const developer = await t.db.selectFrom('developers').select(['id', 'user_id']).where('email', '=', email).executeTakeFirstOrThrow();
    expect(developer.user_id).not.toBeNull();

    // An email some developer already has is theirs to invite into, never taken over.
    const other = new Browser(t.app);
    const taken = uniqueEmail('taken');
    await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email: taken } });
    await other.register(taken);
    expect(await consoleSignIn(other)).toBe('403 /console');
    const otherPage = await other.get('/console');
    expect((await other.post('/console/become-developer', { csrf: csrfOf(otherPage.body), action: 'become_developer' })).statusCode).toBe(409);
  });

  it('links a user by a one-time invitation link', async () => {
    const created = await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email: 'team@elsewhere.example' } });
    const developerId = created.json().id as string;
    const invited = await t.app.inject({ method: 'POST', url: `/v1/admin/developers/${developerId}/invitation`, headers: adminHeaders });
    expect(invited.statusCode).toBe(201);
    const link = relative(new URL(invited.json().url as string));
    expect((await t.app.inject({ method: 'POST', url: '/v1/admin/developers/dev_nope/invitation', headers: adminHeaders })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'POST', url: `/v1/admin/developers/${developerId}/invitation` })).statusCode).toBe(401);

    const browser = new Browser(t.app);
    await browser.register(uniqueEmail('invitee'));
    expect(await consoleSignIn(browser, link)).toBe(`200 ${link}`);
    const accepted = await postForm(browser, link, '/console/invitation', { token: new URL(link, 'http://x').searchParams.get('token')!, action: 'accept' });
    expect(accepted.statusCode).toBe(303);
    expect((await browser.get('/console')).statusCode).toBe(200);

    // Used once: a second user cannot use it.
    const second = new Browser(t.app);
    await second.register(uniqueEmail('late'));
    await consoleSignIn(second, link);
    const again = await postForm(second, link, '/console/invitation', { token: new URL(link, 'http://x').searchParams.get('token')!, action: 'accept' });
    expect(again.statusCode).toBe(400);
    expect((await second.get('/console')).statusCode).toBe(403);
  });

  it('lists, searches and blocks users; lists events; creates and revokes API keys', async () => {
    const { browser, developer } = await developerBrowser(t);
    await consoleSignIn(browser);
    const owned = await makeApp(t.db, { developerId: developer.id, name: 'Listed' });
    const member = await t.db.selectFrom('users').select(['id', 'email']).executeTakeFirstOrThrow();
    await t.db.insertInto('app_users').values({ app_id: owned.id, user_id: member.id, status: 'active', created_at: t.clock.now(), last_login_at: t.clock.now() }).execute();
    const usersUrl = `/console/apps/${owned.id}/users`;
    const found = await browser.get(`${usersUrl}?q=${encodeURIComponent(member.email)}&status=&action=search`);
    expect(found.statusCode).toBe(200);
    expect(found.body).toContain(`data-user="${member.id}"`);
    expect((await browser.get(`${usersUrl}?pageSize=1000`)).statusCode).toBe(400);
    const blocked = await postForm(browser, usersUrl, usersUrl, { action: 'block', user_id: member.id, back: 'q=x' });
    expect(blocked.statusCode).toBe(303);
    expect(String(blocked.headers.location)).toBe(`${usersUrl}?q=x&changed=blocked`);
    const row = await t.db.selectFrom('app_users').select('status').where('app_id', '=', owned.id).where('user_id', '=', member.id).executeTakeFirstOrThrow();
    expect(row.status).toBe('blocked');
    // The user's own page: their address, status and latest events here; no page for strangers.
    const detail = await browser.get(`${usersUrl}/${member.id}`);
    expect(detail.statusCode).toBe(200);
    expect(detail.body).toContain(member.email);
    expect(detail.body).toMatch(/class="badge blocked"/);
    expect(detail.body).toContain('app.user_blocked');
    expect(detail.body).toContain('value="unblock"');
    expect((await browser.get(`${usersUrl}/usr_nobody`)).statusCode).toBe(404);
    const stranger = await t.db.insertInto('users').values({ id: 'usr_stranger_detail', email: 'stranger-detail@example.com', email_verified: 0, password_hash: null, name: null, phone_number: null, birthdate: null, status: 'active', password_changed_at: null, created_at: t.clock.now(), updated_at: t.clock.now() }).execute();
    expect(stranger).toBeDefined();
    expect((await browser.get(`${usersUrl}/usr_stranger_detail`)).statusCode).toBe(404);
    const events = await browser.get(`/console/apps/${owned.id}/events?type=app.user_blocked`);
    expect(events.body).toContain('app.user_blocked');
    // The user by their address (their id on hover), the event's data as fields, not JSON.
    expect(events.body).toContain(`<span title="${member.id}" data-user-id="${member.id}">${member.email}</span>`);
    expect(events.body).toContain('<dl class="event-data">');
    expect((await browser.get(`/console/apps/${owned.id}/events?after=bad`)).statusCode).toBe(400);

    // API keys: the initial key is listed; a new key works on /v1/dev and stops working once revoked.
    const emptyName = await postForm(browser, '/console/keys', '/console/keys', { action: 'create_key', name: ' ' });
    expect(emptyName.statusCode).toBe(400);
    expect(emptyName.body).toContain('id="name-error"');
    const posted = await postForm(browser, '/console/keys', '/console/keys', { action: 'create_key', name: 'CI' });
    const { page: created, secret: key } = await followShownOnce(browser, posted, '/console/keys', 'api_key');
    expect((await t.app.inject({ method: 'GET', url: '/v1/dev/apps', headers: bearer(key) })).statusCode).toBe(200);
    expect((await t.app.inject({ method: 'GET', url: '/v1/dev/apps', headers: bearer(developer.api_key) })).statusCode).toBe(200);
    const keyId = /data-key="([^"]+)"><td>CI</.exec(created.body)![1]!;
    const revoked = await postForm(browser, '/console/keys', '/console/keys', { action: 'revoke_key', key_id: keyId });
    expect(revoked.statusCode).toBe(303);
    expect((await t.app.inject({ method: 'GET', url: '/v1/dev/apps', headers: bearer(key) })).statusCode).toBe(401);
    expect((await postForm(browser, '/console/keys', '/console/keys', { action: 'revoke_key', key_id: keyId })).statusCode).toBe(404);

    // Legal: bad inputs at their fields and nothing published; a good version is published once.
    const legalUrl = `/console/apps/${owned.id}/legal`;
    const badLegal = await postForm(browser, legalUrl, legalUrl, { action: 'publish', docType: 'Terms!', lang: 'x', title: '', content: 'Hi' });
    expect(badLegal.statusCode).toBe(400);
    for (const name of ['docType', 'lang', 'title']) expect(badLegal.body).toContain(`id="${name}-error"`);
    const deep = await postForm(browser, legalUrl, legalUrl, { action: 'publish', docType: 'terms', lang: 'en', title: 'T', content: `${'>'.repeat(50)} deep` });
    expect(deep.statusCode).toBe(400);
    expect(deep.body).toContain('id="content-error"');
    expect(await t.db.selectFrom('legal_versions').select('id').where('owner', '=', owned.id).execute()).toHaveLength(0);
    const published = await postForm(browser, legalUrl, legalUrl, { action: 'publish', docType: 'terms', lang: 'zh-cn', title: '条款', content: '**好**' });
    expect(published.statusCode).toBe(303);
    const version = await t.db.selectFrom('legal_versions').selectAll().where('owner', '=', owned.id).executeTakeFirstOrThrow();
    expect([version.lang, version.content_html.trim()]).toEqual(['zh-CN', '<p><strong>好</strong></p>']);
    expect((await t.db.selectFrom('events').select('type').where('app_id', '=', owned.id).where('type', '=', 'legal.published').execute())).toHaveLength(1);
  });
});

function relative(url: URL): string {
  return `${url.pathname}${url.search}`;
}
