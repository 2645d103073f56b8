import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { authorizeUrl, Browser, makeClient, pkcePair, relative } from '../helpers/oauth-flows.js';

/**
 * Dynamic client registration (docs/reference/oauth.md#dynamic-client-registration-rfc-7591), attack first:
 * who can register (an initial access token of a developer, or nobody but a public, quarantined client
 * when open registration is on), what a registration access token unlocks (its own client only), and
 * that a quarantined client cannot sign anyone in.
 */

const CALLBACK = 'https://native.dcr.test/cb';
const metadata = (overrides: Record<string, unknown> = {}) => ({ client_name: 'MCP client', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', grant_types: ['authorization_code', 'refresh_token'], ...overrides });

describe('dynamic client registration', () => {
  let t: TestApp;
  let developer: { id: string; apiKey: string };
  let ip = 0;
  // Each request from its own address, so the per-IP open-registration limit only bites where a test means it to.
  const from = () => `203.0.113.${++ip}`;

  beforeAll(async () => {
    t = await buildTestApp({ env: { DYNAMIC_REGISTRATION: '1', OPEN_REGISTRATION: '1', OPEN_REGISTRATION_PER_HOUR: '3' } });
    developer = await createDeveloperViaApi(t);
  });
  afterAll(async () => t?.close());

  const issue = async (body: Record<string, unknown> = {}) => {
    const res = await t.app.inject({ method: 'POST', url: '/v1/dev/initial-access-tokens', headers: bearer(developer.apiKey), payload: { name: 'CI', ...body } });
    expect(res.statusCode).toBe(201);
    return res.json() as { id: string; token: string };
  };
  const register = (payload: unknown, token?: string, remoteAddress = from()) =>
    t.app.inject({ method: 'POST', url: '/oauth/register', headers: token ? bearer(token) : {}, payload: payload as Record<string, unknown>, remoteAddress });

  it('an initial access token registers one client of its developer; used, it registers nothing more', async () => {
    const iat = await issue();
    const res = await register(metadata(), iat.token);
    expect(res.statusCode).toBe(201);
    expect(res.headers['cache-control']).toBe('no-store');
    const body = res.json();
    expect(body).toMatchObject({ client_name: 'MCP client', redirect_uris: [CALLBACK], token_endpoint_auth_method: 'none', quarantined: false });
    expect(body.registration_client_uri).toBe(`${t.config.baseUrl}/oauth/register/${body.client_id}`);
    const apps = await t.app.inject({ method: 'GET', url: '/v1/dev/apps', headers: bearer(developer.apiKey) });
    expect(apps.json().items.map((a: { id: string }) => a.id)).toContain(body.client_id);

    const again = await register(metadata(), iat.token);
    expect(again.statusCode).toBe(401);
    expect(again.json().error).toBe('invalid_token');
    expect(again.headers['www-authenticate']).toContain('invalid_token');
    // The stored form is a hash: the token appears nowhere in the database or the logs.
    const row = await t.db.selectFrom('initial_access_tokens').selectAll().where('id', '=', iat.id).executeTakeFirstOrThrow();
    expect(JSON.stringify(row)).not.toContain(iat.token);
    expect(t.logs.join('\n')).not.toContain(iat.token);
    expect(t.logs.join('\n')).not.toContain(body.registration_access_token);
  });

  it('a single-use token registers one client even when two registrations race', async () => {
    const iat = await issue();
    const results = await Promise.all([0, 1, 2].map((i) => register(metadata({ redirect_uris: [`https://race${i}.dcr.test/cb`] }), iat.token)));
    expect(results.map((r) => r.statusCode).sort()).toEqual([201, 401, 401]);
  });

  it('refuses an expired, a revoked, an unknown and a missing-while-closed token, creating nothing', async () => {
    const before = await t.db.selectFrom('apps').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    const expiring = await issue({ expires_in_days: 1, single_use: false });
    t.clock.advance(86_401);
    expect((await register(metadata(), expiring.token)).statusCode).toBe(401);
    const revoked = await issue({ single_use: false });
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/dev/initial-access-tokens/${revoked.id}`, headers: bearer(developer.apiKey) })).statusCode).toBe(204);
    expect((await register(metadata(), revoked.token)).statusCode).toBe(401);
    expect((await register(metadata(), 'iat_not-a-token')).statusCode).toBe(401);
    // Another developer cannot revoke (or see) this developer's tokens.
    const other = await createDeveloperViaApi(t);
    const live = await issue({ single_use: false });
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/dev/initial-access-tokens/${live.id}`, headers: bearer(other.apiKey) })).statusCode).toBe(404);
    const listed = await t.app.inject({ method: 'GET', url: '/v1/dev/initial-access-tokens', headers: bearer(other.apiKey) });
    expect(listed.json().items).toEqual([]);
    const after = await t.db.selectFrom('apps').select((eb) => eb.fn.countAll<number>().as('n')).executeTakeFirstOrThrow();
    expect(Number(after.n)).toBe(Number(before.n));
  });

  it('a confidential client gets its secret once and can authenticate with it', async () => {
    const iat = await issue();
    const res = await register(metadata({ token_endpoint_auth_method: 'client_secret_basic', redirect_uris: ['https://server.dcr.test/cb'] }), iat.token);
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.client_secret).toMatch(/^cs_/);
    expect(body.client_secret_expires_at).toBe(0);
    const read = await t.app.inject({ method: 'GET', url: `/oauth/register/${body.client_id}`, headers: bearer(body.registration_access_token) });
    expect(read.statusCode).toBe(200);
    expect(read.json().client_secret).toBeUndefined();
    expect(read.json().registration_access_token).toBeUndefined();
    const basic = Buffer.from(`${body.client_id}:${body.client_secret}`).toString('base64');
    const introspect = await t.app.inject({ method: 'POST', url: '/oauth/introspect', headers: { authorization: `Basic ${basic}` }, payload: { token: 'x' } });
    expect(introspect.statusCode).toBe(200);
  });

  it('validates metadata with the RFC 7591 errors', async () => {
    const iat = await issue({ single_use: false });
    const cases: Array<[unknown, string]> = [
      [metadata({ redirect_uris: undefined }), 'invalid_redirect_uri'],
      [metadata({ redirect_uris: [] }), 'invalid_redirect_uri'],
      [metadata({ redirect_uris: ['http://evil.example/cb'] }), 'invalid_redirect_uri'],
      [metadata({ redirect_uris: ['https://a.example/cb#frag'] }), 'invalid_redirect_uri'],
      [metadata({ redirect_uris: ['javascript:/alert(1)'] }), 'invalid_redirect_uri'],
      [metadata({ redirect_uris: 'https://a.example/cb' }), 'invalid_client_metadata'],
      [metadata({ token_endpoint_auth_method: 'private_key_jwt' }), 'invalid_client_metadata'],
      [metadata({ grant_types: ['client_credentials'] }), 'invalid_client_metadata'],
      [metadata({ grant_types: ['implicit', 'authorization_code'] }), 'invalid_client_metadata'],
      [metadata({ response_types: ['token'] }), 'invalid_client_metadata'],
      [metadata({ client_name: '' }), 'invalid_client_metadata'],
      [metadata({ client_name: 'x'.repeat(101) }), 'invalid_client_metadata'],
    ];
    for (const [payload, error] of cases) {
      const res = await register(payload, iat.token);
      expect({ payload, status: res.statusCode, error: res.json().error }).toEqual({ payload, status: 400, error });
    }
    // Unknown fields are ignored, loopback http is fine for a native client.
    const ok = await register(metadata({ redirect_uris: ['http://127.0.0.1:8123/cb'], software_id: 'x', logo_uri: 'https://x.example/l.png' }), iat.token);
    expect(ok.statusCode).toBe(201);
  });

  it('open registration: public clients only, never a host another app uses, rate limited per IP', async () => {
    const confidential = await register(metadata({ token_endpoint_auth_method: 'client_secret_basic', redirect_uris: ['https://open1.dcr.test/cb'] }));
    expect(confidential.statusCode).toBe(400);
    expect(confidential.json().error).toBe('invalid_client_metadata');
    const defaulted = await register({ redirect_uris: ['https://open2.dcr.test/cb'] });
    expect(defaulted.json().error).toBe('invalid_client_metadata');

    const victim = await makeClient(t, { redirectUris: ['https://victim.dcr.test/callback'] });
    for (const uri of ['https://victim.dcr.test/callback', 'https://victim.dcr.test/other']) {
      const grab = await register(metadata({ redirect_uris: [uri] }));
      expect(grab.statusCode).toBe(400);
      expect(grab.json().error).toBe('invalid_redirect_uri');
    }
    expect(victim.app.redirectUris).toEqual(['https://victim.dcr.test/callback']);

    // A header that is no bearer token is refused, not taken as an open registration past the limit.
    const basic = await t.app.inject({ method: 'POST', url: '/oauth/register', headers: { authorization: 'Basic eDp5' }, payload: metadata({ redirect_uris: ['https://basic.dcr.test/cb'] }), remoteAddress: from() });
    expect(basic.statusCode).toBe(401);

    const address = from();
    for (let i = 0; i < 3; i++) expect((await register(metadata({ redirect_uris: [`https://flood${i}.dcr.test/cb`] }), undefined, address)).statusCode).toBe(201);
    const fourth = await register(metadata({ redirect_uris: ['https://flood9.dcr.test/cb'] }), undefined, address);
    expect(fourth.statusCode).toBe(429);
  });

  it('a quarantined client cannot sign anyone in until the operator approves it', async () => {
    const res = await register(metadata({ redirect_uris: ['https://quarantine.dcr.test/cb'] }));
    expect(res.statusCode).toBe(201);
    const body = res.json();
    expect(body.quarantined).toBe(true);
    const client = { app: { id: body.client_id, redirectUris: body.redirect_uris } } as Parameters<typeof authorizeUrl>[0];
    const browser = new Browser(t.app);
    await browser.register();
    const { url } = authorizeUrl(client, { redirectUri: 'https://quarantine.dcr.test/cb' } as never);
    const refused = await browser.get(url);
    expect(refused.statusCode).toBe(400);
    expect(String(refused.headers.location ?? '')).toBe('');
    const rest = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: 'nobody@example.com', password: 'whatever-long-enough', client_id: body.client_id } });
    expect(rest.statusCode).toBe(401);
    expect((await t.app.inject({ method: 'POST', url: '/oauth/token', payload: { grant_type: 'authorization_code', code: 'x', client_id: body.client_id, code_verifier: pkcePair().verifier, redirect_uri: 'https://quarantine.dcr.test/cb' } })).json().error).toBe('invalid_client');
    // The client's own management keeps it quarantined.
    const put = await t.app.inject({ method: 'PUT', url: `/oauth/register/${body.client_id}`, headers: bearer(body.registration_access_token), payload: { ...metadata({ redirect_uris: ['https://quarantine.dcr.test/cb2'] }), client_id: body.client_id } });
    expect(put.statusCode).toBe(200);
    expect(put.json().quarantined).toBe(true);

    const listed = await t.app.inject({ method: 'GET', url: '/v1/admin/registrations/quarantined', headers: adminHeaders });
    expect(listed.json().items.map((c: { client_id: string }) => c.client_id)).toContain(body.client_id);
    expect((await t.app.inject({ method: 'POST', url: `/v1/admin/registrations/${body.client_id}/approve`, headers: bearer(developer.apiKey) })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'POST', url: `/v1/admin/registrations/${body.client_id}/approve`, headers: adminHeaders })).statusCode).toBe(204);
    expect((await t.app.inject({ method: 'POST', url: `/v1/admin/registrations/${body.client_id}/approve`, headers: adminHeaders })).statusCode).toBe(404);
    const approved = authorizeUrl({ app: { ...client.app, redirectUris: ['https://quarantine.dcr.test/cb2'] } } as never, { redirectUri: 'https://quarantine.dcr.test/cb2' } as never);
    const now = await browser.get(approved.url);
    expect(now.statusCode).toBe(302);
    expect(relative(String(now.headers.location))).not.toContain('error=');
  });

  it("a registration access token manages its own client only; a rejected client is gone", async () => {
    const a = (await register(metadata({ redirect_uris: ['https://client-a.dcr.test/cb'] }))).json();
    const b = (await register(metadata({ redirect_uris: ['https://client-b.dcr.test/cb'] }))).json();
    for (const method of ['GET', 'DELETE'] as const) {
      const res = await t.app.inject({ method, url: `/oauth/register/${b.client_id}`, headers: bearer(a.registration_access_token) });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_token');
    }
    const put = await t.app.inject({ method: 'PUT', url: `/oauth/register/${b.client_id}`, headers: bearer(a.registration_access_token), payload: { ...metadata({ redirect_uris: ['https://client-a.dcr.test/cb'] }), client_id: b.client_id } });
    expect(put.statusCode).toBe(401);
    expect((await t.app.inject({ method: 'GET', url: `/oauth/register/${b.client_id}` })).statusCode).toBe(401);
    // A's own token cannot turn it confidential or move it onto B's host.
    const toConfidential = await t.app.inject({ method: 'PUT', url: `/oauth/register/${a.client_id}`, headers: bearer(a.registration_access_token), payload: { ...metadata({ token_endpoint_auth_method: 'client_secret_basic', redirect_uris: ['https://client-a.dcr.test/cb'] }), client_id: a.client_id } });
    expect(toConfidential.json().error).toBe('invalid_client_metadata');
    const onto = await t.app.inject({ method: 'PUT', url: `/oauth/register/${a.client_id}`, headers: bearer(a.registration_access_token), payload: { ...metadata({ redirect_uris: ['https://client-b.dcr.test/cb'] }), client_id: a.client_id } });
    expect(onto.json().error).toBe('invalid_redirect_uri');

    expect((await t.app.inject({ method: 'DELETE', url: `/v1/admin/registrations/${b.client_id}`, headers: adminHeaders })).statusCode).toBe(204);
    expect((await t.app.inject({ method: 'GET', url: `/oauth/register/${b.client_id}`, headers: bearer(b.registration_access_token) })).statusCode).toBe(401);
    expect((await t.app.inject({ method: 'DELETE', url: `/oauth/register/${a.client_id}`, headers: bearer(a.registration_access_token) })).statusCode).toBe(204);
    expect(await t.db.selectFrom('apps').select('id').where('id', '=', a.client_id).executeTakeFirst()).toBeUndefined();
  });

  it('discovery names the registration endpoint', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/.well-known/oauth-authorization-server' })).json();
    expect(doc.registration_endpoint).toBe(`${t.config.baseUrl}/oauth/register`);
  });
});

describe('dynamic client registration, off (the default)', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t?.close());

  it('answers 404 and discovery has no registration_endpoint', async () => {
    const res = await t.app.inject({ method: 'POST', url: '/oauth/register', payload: metadata() });
    expect(res.statusCode).toBe(404);
    const doc = (await t.app.inject({ method: 'GET', url: '/.well-known/openid-configuration' })).json();
    expect(doc.registration_endpoint).toBeUndefined();
  });

  it('with registration on but open registration off, no token is 401', async () => {
    const on = await buildTestApp({ env: { DYNAMIC_REGISTRATION: '1' } });
    try {
      const res = await on.app.inject({ method: 'POST', url: '/oauth/register', payload: metadata() });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_token');
    } finally {
      await on.close();
    }
  });
});
