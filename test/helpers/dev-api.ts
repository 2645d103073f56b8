import { randomBytes } from 'node:crypto';
import { TEST_ADMIN_TOKEN, type TestApp } from './app.js';

/** Black-box helpers for the developer and admin APIs. */

export const bearer = (token: string) => ({ authorization: `Bearer ${token}` });
export const adminHeaders = bearer(TEST_ADMIN_TOKEN);

/** Creates a developer through the admin API; returns its id and one-time API key. */
export async function createDeveloperViaApi(t: TestApp, email = `dev-${randomBytes(4).toString('hex')}@example.com`): Promise<{ id: string; apiKey: string }> {
  const res = await t.app.inject({ method: 'POST', url: '/v1/admin/developers', headers: adminHeaders, payload: { email, name: 'Dev' } });
  if (res.statusCode !== 201) throw new Error(`developer creation failed: ${res.statusCode} ${res.body}`);
  const body = res.json();
  return { id: body.id, apiKey: body.api_key };
}

export const appBody = (overrides: Record<string, unknown> = {}) => ({
  name: 'My app',
  redirect_uris: ['https://a.example/cb'],
  type: 'public',
  features: { auth: true, profile: false },
  required_fields: [],
  ...overrides,
});
