import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';

/**
 * The developer API's resource and client-credentials settings (docs/reference/oauth.md#resource-indicators-rfc-8707,
 * docs/reference/oauth.md#client-credentials): what is accepted, and every refusal changes nothing.
 */
describe('developer API: resource_uris and client credentials', () => {
  let t: TestApp;
  let dev: { id: string; apiKey: string };
  beforeAll(async () => {
    t = await buildTestApp();
    dev = await createDeveloperViaApi(t);
  });
  afterAll(async () => t?.close());

  const create = (body: Record<string, unknown>) => t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(dev.apiKey), payload: appBody(body) });
  const patch = (id: string, body: Record<string, unknown>) => t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${id}`, headers: bearer(dev.apiKey), payload: body });

  it('off and empty by default; a confidential app declares APIs and turns client credentials on', async () => {
    const plain = (await create({ type: 'confidential' })).json();
    expect(plain).toMatchObject({ resource_uris: [], client_credentials: false, client_credentials_scopes: [] });
    const updated = await patch(plain.id, { resource_uris: ['https://orders.example/', 'http://localhost:4000/api'], client_credentials: true, client_credentials_scopes: ['orders:read'] });
    expect(updated.statusCode).toBe(200);
    expect(updated.json()).toMatchObject({ resource_uris: ['https://orders.example/', 'http://localhost:4000/api'], client_credentials: true, client_credentials_scopes: ['orders:read'] });
  });

  it.each([
    ['a fragment', { resource_uris: ['https://orders.example/#x'] }],
    ['a relative URI', { resource_uris: ['/api'] }],
    ['a non-http scheme', { resource_uris: ['urn:example:api'] }],
    ['credentials', { resource_uris: ['https://user:pw@orders.example/'] }],
    ['duplicates', { resource_uris: ['https://orders.example/', 'https://orders.example/'] }],
    ['a user scope', { client_credentials_scopes: ['openid'] }],
    ['a malformed scope', { client_credentials_scopes: ['orders read'] }],
  ])('refuses %s (400, nothing changed)', async (_name, body) => {
    const app = (await create({ type: 'confidential' })).json();
    const res = await patch(app.id, body);
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request' });
    expect((await t.app.inject({ url: `/v1/dev/apps/${app.id}`, headers: bearer(dev.apiKey) })).json()).toMatchObject({ resource_uris: [], client_credentials_scopes: [] });
  });

  it('never turns client credentials on for a public app', async () => {
    const created = await create({ type: 'public', client_credentials: true });
    expect(created.statusCode).toBe(400);
    const app = (await create({ type: 'public' })).json();
    expect((await patch(app.id, { client_credentials: true })).statusCode).toBe(400);
    expect((await t.app.inject({ url: `/v1/dev/apps/${app.id}`, headers: bearer(dev.apiKey) })).json()).toMatchObject({ client_credentials: false });
  });
});
