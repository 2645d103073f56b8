import { generateSync } from 'otplib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { insertPasskey } from '../../src/storage/repos/passkeys.js';
import { findUserByEmail } from '../../src/storage/repos/users.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { quickUser, tokensFor } from '../helpers/members.js';
import { authorizeAndGetCode, Browser, csrfOf, exchangeCode, makeClient, type TestClient, uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * "Download my data" (docs/account/data-export.md): `GET /v1/auth/account/export` with an app's access
 * token (the account, and of the apps only that app), `GET /account/export` on the hosted account page
 * (everything, every app's profile document included). Never a hash or secret; a limit per account.
 */

let t: TestApp;
beforeAll(async () => {
  t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', EXPORT_PER_HOUR: '5' } });
});
afterAll(async () => t?.close());

const restExport = (token?: string, headers: Record<string, string> = {}) =>
  t.app.inject({ method: 'GET', url: '/v1/auth/account/export', headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), ...headers } });

const fieldValues = (html: string, field: string) => [...html.matchAll(new RegExp(`data-field="${field}">([^<]+)<`, 'g'))].map((m) => m[1]!);

interface Person {
  browser: Browser;
  userId: string;
  email: string;
  tokensA: { access_token: string; refresh_token: string };
  tokensB: { access_token: string; refresh_token: string };
  totpSecret: string;
  recoveryCodes: string[];
  /** Values that must never appear in an export. */
  secrets: string[];
}

/**
 * A person who registered in a browser, proved the address, signed in to apps A and B (consent, grants,
 * membership), stored a profile document at each, set up an authenticator app (with recovery codes),
 * has an account-wide passkey and one of app B, and accepted the platform terms and app B's privacy policy.
 */
async function person(appA: TestClient, appB: TestClient): Promise<Person> {
  const browser = new Browser(t.app);
  const { email } = await browser.register(uniqueEmail('export'));
  await t.db.updateTable('users').set({ email_verified: 1, phone_number: '+4915112345678', birthdate: '1990-02-03' }).where('email', '=', email).execute();
  const user = await t.db.selectFrom('users').select(['id']).where('email', '=', email).executeTakeFirstOrThrow();

  const tokensAt = async (client: TestClient) => {
    const { code, verifier, redirectUri } = await authorizeAndGetCode(browser, client);
    const res = await exchangeCode(t.app, client, code, verifier, redirectUri);
    expect(res.statusCode).toBe(200);
    return res.json() as { access_token: string; refresh_token: string };
  };
  const tokensA = await tokensAt(appA);
  const tokensB = await tokensAt(appB);

  for (const [client, tokens, data] of [
    [appA, tokensA, { note: 'stored-at-app-A', theme: 'dark' }],
    [appB, tokensB, { note: 'stored-at-app-B', diagnosis: 'private to B' }],
  ] as const) {
    const put = await t.app.inject({
      method: 'PUT',
      url: `/v1/profile/${user.id}`,
      headers: { authorization: `Bearer ${tokens.access_token}`, 'x-client-id': client.app.id },
      payload: { data },
    });
    expect(put.statusCode).toBe(200);
  }

  // The authenticator app, set up on the account page as a person does.
  const account = await browser.get('/account');
  const setup = await browser.post('/account/mfa', { csrf: csrfOf(account.body), action: 'setup_totp' });
  expect(setup.statusCode).toBe(303);
  const page = await browser.get('/account/mfa/totp');
  const [totpSecret] = fieldValues(page.body, 'totp_secret');
  const confirmed = await browser.post('/account/mfa', { csrf: csrfOf(page.body), action: 'verify', code: generateSync({ secret: totpSecret!, epoch: t.clock.now() }) });
  expect(confirmed.statusCode).toBe(200);
  const recoveryCodes = fieldValues(confirmed.body, 'recovery_code');
  expect(recoveryCodes).toHaveLength(10);

  const now = t.clock.now();
  const keyMaterial = { wide: { credentialId: `cred-wide-${newId('x')}`, publicKey: `pk-wide-${newId('x')}` }, app: { credentialId: `cred-b-${newId('x')}`, publicKey: `pk-b-${newId('x')}` } };
  const passkey = { userId: user.id, counter: 0, transports: ['internal'], deviceType: 'multiDevice' as const, backedUp: true, createdAt: now };
  await insertPasskey(t.db, { ...passkey, id: newId('pk'), ...keyMaterial.wide, name: 'Laptop passkey', appId: null });
  await insertPasskey(t.db, { ...passkey, id: newId('pk'), ...keyMaterial.app, name: 'Passkey for B', appId: appB.app.id });

  await t.db
    .insertInto('provider_identities')
    .values({ id: newId('idn'), user_id: user.id, issuer: 'https://idp.example', subject: 'idp-subject-42', email: 'ada@work.example', created_at: now })
    .execute();
  await t.db
    .insertInto('legal_acceptances')
    .values([
      { id: newId('acc'), user_id: user.id, owner: 'platform', doc_type: 'terms', lang: 'en', version: 3, accepted_at: now },
      { id: newId('acc'), user_id: user.id, owner: appB.app.id, doc_type: 'privacy', lang: 'en', version: 1, accepted_at: now },
    ])
    .execute();

  // Every stored secret of the person: hashes, sealed values, key material, tokens.
  const stored = await Promise.all([
    t.db.selectFrom('users').select(['password_hash as v']).where('id', '=', user.id).execute(),
    t.db.selectFrom('totp_factors').select(['secret_sealed as v']).where('user_id', '=', user.id).execute(),
    t.db.selectFrom('recovery_codes').select(['code_hash as v']).where('user_id', '=', user.id).execute(),
    t.db.selectFrom('refresh_tokens as r').innerJoin('grants as g', 'g.id', 'r.grant_id').select(['r.token_hash as v']).where('g.user_id', '=', user.id).execute(),
    t.db.selectFrom('browser_sessions').select(['id_hash as v']).where('user_id', '=', user.id).execute(),
    t.db.selectFrom('browser_sessions').select(['csrf_token as v']).where('user_id', '=', user.id).execute(),
    t.db.selectFrom('authorization_codes').select(['code_hash as v']).where('user_id', '=', user.id).execute(),
  ]);
  const secrets = [
    ...stored.flat().map((r) => r.v).filter((v): v is string => typeof v === 'string' && v.length >= 8),
    totpSecret!,
    ...recoveryCodes,
    tokensA.access_token,
    tokensA.refresh_token,
    tokensB.access_token,
    tokensB.refresh_token,
    ...Object.values(keyMaterial).flatMap((k) => [k.credentialId, k.publicKey]),
  ];
  expect(secrets.some((s) => s.startsWith('$argon2'))).toBe(true);
  expect(secrets.length).toBeGreaterThan(20);
  return { browser, userId: user.id, email, tokensA, tokensB, totpSecret: totpSecret!, recoveryCodes, secrets };
}

function expectNoSecrets(body: string, secrets: readonly string[]): void {
  expect(body).not.toContain('$argon2');
  expect(secrets.filter((secret) => body.includes(secret))).toEqual([]);
  expect(body).not.toMatch(/"(password_hash|token_hash|code_hash|secret_sealed|public_key|credential_id|id_hash|csrf_token|client_secret_hash)"/);
}

type ExportJson = {
  format: string;
  exported_at: string;
  coverage: string;
  app_id: string | null;
  account: Record<string, unknown>;
  apps: Array<{ app_id: string; name: string | null; membership: { status: string } | null; consent: { scopes: string[] } | null }>;
  factors: { authenticator_app: { confirmed_at: string | null } | null; recovery_codes: { total: number; unused: number } };
  passkeys: Array<{ name: string; app_id: string | null }>;
  sessions: { apps: Array<{ app_id: string; amr: string[]; revoked_at: string | null }>; browser: unknown[] };
  profiles: Array<{ app_id: string; version: number; data: Record<string, unknown> }>;
  legal_acceptances: Array<{ owner: string; doc_type: string; version: number }>;
  events: { truncated: boolean; items: Array<{ type: string; app_id: string | null; ip: string | null }> };
};

describe('data export', () => {
  let appA: TestClient;
  let appB: TestClient;
  let p: Person;
  beforeAll(async () => {
    appA = await makeClient(t, { name: 'App A' });
    appB = await makeClient(t, { name: 'App B' });
    p = await person(appA, appB);
  });

  afterAll(() => {
    // Neither door writes the person's secrets (or the export) to a log line.
    expectNoSecretsInLogs(t.logs, [...p.secrets, 'stored-at-app-A', 'stored-at-app-B']);
  });

  it("over REST with app A's token: the account and app A's part, never app B's profile document, sign-ins or events", async () => {
    const res = await restExport(p.tokensA.access_token);
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['cache-control']).toBe('no-store');
    const today = new Date(t.clock.now() * 1000).toISOString().slice(0, 10);
    expect(res.headers['content-disposition']).toBe(`attachment; filename="gatehouse-export-${today}.json"`);
    expectNoSecrets(res.body, p.secrets);

    const doc = res.json() as ExportJson;
    expect(doc.format).toBe('gatehouse.account-export/1');
    expect(new Date(doc.exported_at).toISOString()).toBe(doc.exported_at);
    expect(doc.coverage).toBe('app');
    expect(doc.app_id).toBe(appA.app.id);
    expect(doc.account).toMatchObject({ id: p.userId, email: p.email, email_verified: true, name: 'Alice Example', phone_number: '+4915112345678', birthdate: '1990-02-03', status: 'active', has_password: true });
    // The provider binding is an identity apps never see: only on the account page.
    expect(doc.account.provider_identities).toEqual([]);
    expect(res.body).not.toContain('idp-subject-42');
    expect(doc.apps).toEqual([expect.objectContaining({ app_id: appA.app.id, name: 'App A', membership: expect.objectContaining({ status: 'active' }), consent: expect.objectContaining({ scopes: ['email', 'openid', 'profile'] }) })]);
    expect(doc.factors.authenticator_app?.confirmed_at).toEqual(expect.any(String));
    expect(doc.factors.recovery_codes).toEqual(expect.objectContaining({ total: 10, unused: 10 }));
    expect(doc.passkeys.map((k) => k.name)).toEqual(['Laptop passkey']);
    expect(doc.sessions.apps.length).toBeGreaterThan(0);
    expect(doc.sessions.apps.every((s) => s.app_id === appA.app.id)).toBe(true);
    expect(doc.sessions.browser).toEqual([]);
    expect(doc.profiles).toEqual([expect.objectContaining({ app_id: appA.app.id, version: 1, data: { note: 'stored-at-app-A', theme: 'dark' } })]);
    expect(res.body).not.toContain('stored-at-app-B');
    expect(res.body).not.toContain('private to B');
    expect(res.body).not.toContain(appB.app.id);
    expect(doc.legal_acceptances).toEqual([expect.objectContaining({ owner: 'platform', doc_type: 'terms', version: 3 })]);
    expect(doc.events.items.length).toBeGreaterThan(0);
    expect(doc.events.items.every((e) => e.app_id === appA.app.id)).toBe(true);
    expect(doc.events.items.map((e) => e.type)).toContain('consent.granted');
  });

  it("app B's token gets app B's document and app-scoped passkey, not app A's", async () => {
    const res = await restExport(p.tokensB.access_token);
    expect(res.statusCode).toBe(200);
    expectNoSecrets(res.body, p.secrets);
    const doc = res.json() as ExportJson;
    expect(doc.profiles.map((d) => d.data.note)).toEqual(['stored-at-app-B']);
    expect(doc.passkeys.map((k) => k.name).sort()).toEqual(['Laptop passkey', 'Passkey for B']);
    expect(doc.legal_acceptances.map((l) => l.owner).sort()).toEqual([appB.app.id, 'platform'].sort());
    expect(res.body).not.toContain('stored-at-app-A');
  });

  it('on the account page: everything, every app\'s profile document included, as a download', async () => {
    const page = await p.browser.get('/account');
    expect(page.statusCode).toBe(200);
    expect(page.body).toMatch(/<section class="section" aria-labelledby="your-data">\s*<h2 id="your-data">Your data<\/h2>/);
    expect(page.body).toContain('<a class="button secondary" href="/account/export" download data-export>Download my data</a>');

    const res = await p.browser.get('/account/export', { 'sec-fetch-site': 'same-origin' });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^application\/json/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.headers['content-disposition']).toMatch(/^attachment; filename="gatehouse-export-\d{4}-\d{2}-\d{2}\.json"$/);
    expectNoSecrets(res.body, p.secrets);

    const doc = res.json() as ExportJson;
    expect(doc.format).toBe('gatehouse.account-export/1');
    expect(doc.coverage).toBe('full');
    expect(doc.app_id).toBeNull();
    expect(doc.account.provider_identities).toEqual([expect.objectContaining({ issuer: 'https://idp.example', subject: 'idp-subject-42', email: 'ada@work.example' })]);
    expect(doc.apps.map((a) => a.app_id).sort()).toEqual([appA.app.id, appB.app.id].sort());
    expect(doc.apps.every((a) => a.consent !== null && a.membership !== null)).toBe(true);
    expect(doc.profiles.map((d) => d.data.note).sort()).toEqual(['stored-at-app-A', 'stored-at-app-B']);
    expect(doc.passkeys.map((k) => k.name).sort()).toEqual(['Laptop passkey', 'Passkey for B']);
    expect(new Set(doc.sessions.apps.map((s) => s.app_id))).toEqual(new Set([appA.app.id, appB.app.id]));
    expect(doc.sessions.browser.length).toBeGreaterThan(0);
    expect(doc.legal_acceptances).toHaveLength(2);
    const types = doc.events.items.map((e) => e.type);
    expect(types).toEqual(expect.arrayContaining(['user.registered', 'consent.granted', 'profile.updated', 'mfa.enrolled']));
    expect(doc.events.truncated).toBe(false);
  });

  it('the Simplified Chinese account page offers the download too', async () => {
    const page = await p.browser.get('/account?ui_locales=zh-CN');
    expect(page.statusCode).toBe(200);
    expect(page.body).toContain('<h2 id="your-data">你的数据</h2>');
    expect(page.body).toContain('download data-export>下载我的数据</a>');
  });

  it('no credential: 401 over REST; a signed-out browser gets 401; another site cannot start the download (403)', async () => {
    const none = await restExport();
    expect(none.statusCode).toBe(401);
    expect(none.json()).toMatchObject({ code: 'unauthorized' });
    const garbage = await restExport('not-a-token');
    expect(garbage.statusCode).toBe(401);
    // A refresh token is no access token.
    expect((await restExport(p.tokensA.refresh_token)).statusCode).toBe(401);

    const signedOut = await new Browser(t.app).get('/account/export');
    expect(signedOut.statusCode).toBe(401);
    expect(signedOut.headers['content-disposition']).toBeUndefined();

    const crossSite = await p.browser.get('/account/export', { 'sec-fetch-site': 'cross-site' });
    expect(crossSite.statusCode).toBe(403);
    expect(crossSite.headers['content-disposition']).toBeUndefined();
  });

  it("a disabled app, or one whose Auth feature is off, exports nothing with a token it still holds", async () => {
    const client = await makeClient(t);
    const user = await quickUser(t);
    const tokens = await tokensFor(t, client.app, user);
    await t.db.updateTable('apps').set({ feature_auth: 0 }).where('id', '=', client.app.id).execute();
    const off = await restExport(tokens.access_token);
    expect(off.statusCode).toBe(403);
    expect(off.json()).toMatchObject({ code: 'feature_disabled' });
    await t.db.updateTable('apps').set({ feature_auth: 1, disabled: 1 }).where('id', '=', client.app.id).execute();
    expect((await restExport(tokens.access_token)).statusCode).toBe(401);
  });

  it('a session JWT of a pending sign-in is no credential for the export (401)', async () => {
    const client = await makeClient(t, { requiredFields: ['phone_number'] });
    const browser = new Browser(t.app);
    const { email, password } = await browser.register(uniqueEmail('pending'));
    const login = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email, password, client_id: client.app.id } });
    expect(login.statusCode).toBe(200);
    const pending = login.json() as { status: string; session?: string };
    expect(pending.status).toBe('pending');
    const refused = await restExport(pending.session!);
    expect(refused.statusCode).toBe(401);
    expect(refused.body).not.toContain(email);
  });

  it('a revoked app session exports nothing', async () => {
    const user = await quickUser(t);
    const tokens = await tokensFor(t, appA.app, user);
    expect((await restExport(tokens.access_token)).statusCode).toBe(200);
    await t.db.updateTable('grants').set({ revoked_at: t.clock.now(), revoked_reason: 'test' }).where('id', '=', tokens.grantId).execute();
    expect((await restExport(tokens.access_token)).statusCode).toBe(401);
  });
});

describe('the export limit', () => {
  it('EXPORT_PER_HOUR exports per account in any hour, both doors together; then 429 rate_limited with Retry-After', async () => {
    const client = await makeClient(t);
    const user = await quickUser(t);
    const other = await quickUser(t);
    const tokens = await tokensFor(t, client.app, user);
    for (let i = 0; i < 5; i++) expect((await restExport(tokens.access_token)).statusCode).toBe(200);
    const refused = await restExport(tokens.access_token);
    expect(refused.statusCode).toBe(429);
    expect(refused.json()).toMatchObject({ code: 'rate_limited', retry_after: expect.any(Number) });
    expect(Number(refused.headers['retry-after'])).toBeGreaterThan(0);
    expect(refused.headers['content-disposition']).toBeUndefined();
    // Per account: another person is not held back.
    expect((await restExport((await tokensFor(t, client.app, other)).access_token)).statusCode).toBe(200);
    // An hour later the account may export again.
    t.clock.advance(3601);
    expect((await restExport(tokens.access_token)).statusCode).toBe(401); // the access token has expired meanwhile
    expect((await restExport((await tokensFor(t, client.app, user)).access_token)).statusCode).toBe(200);
  });

  it('the account page counts against the same limit', async () => {
    const browser = new Browser(t.app);
    const { email } = await browser.register(uniqueEmail('limit'));
    const user = await findUserByEmail(t.db, email);
    const client = await makeClient(t);
    const { access_token } = await tokensFor(t, client.app, user!);
    for (let i = 0; i < 5; i++) expect((await restExport(access_token)).statusCode).toBe(200);
    const page = await browser.get('/account/export');
    expect(page.statusCode).toBe(429);
    expect(Number(page.headers['retry-after'])).toBeGreaterThan(0);
  });
});
