import type { ChildProcess } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { startExampleServer } from '../helpers/examples.js';
import { freePort } from '../helpers/processes.js';

/**
 * The token-verifying API quickstart (docs/quickstart/verify-tokens.md) runs as written:
 * examples/verify-tokens/server.mjs as a child process against a started server.
 */
describe('quickstart: an API that accepts Gatehouse access tokens', () => {
  let t: TestApp;
  let api: ChildProcess;
  let apiUrl: string;
  const tokens: Record<'mine' | 'other', string> = { mine: '', other: '' };

  async function tokenFor(appId: string): Promise<string> {
    const email = `verify.${Math.random().toString(36).slice(2)}@example.com`;
    const password = 'correct horse battery staple';
    const registered = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password, client_id: appId } });
    expect(registered.statusCode, registered.body).toBe(201);
    return registered.json().access_token;
  }

  beforeAll(async () => {
    // The issuer the tokens name is where the API finds the keys: the server's own address.
    const port = await freePort();
    const base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({ env: { BASE_URL: base, IP_AUTH_PER_MINUTE: '1000' } });
    await t.app.listen({ port, host: '127.0.0.1' });
    const developer = await createDeveloperViaApi(t);
    const [mine, other] = await Promise.all(
      ['API app', 'Another app'].map(async (name) => (await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody({ name }) })).json().id as string),
    );
    tokens.mine = await tokenFor(mine!);
    tokens.other = await tokenFor(other!);
    ({ process: api, url: apiUrl } = await startExampleServer('examples/verify-tokens/server.mjs', { GATEHOUSE_URL: base, CLIENT_ID: mine!, PORT: '0' }));
  });
  afterAll(async () => {
    api?.kill();
    await t?.close();
  });

  const me = (token?: string) => fetch(`${apiUrl}/me`, { headers: token ? { authorization: `Bearer ${token}` } : {} });

  it("answers the caller's user id for the app's own token", async () => {
    const res = await me(tokens.mine);
    expect(res.status).toBe(200);
    expect(await res.json()).toMatchObject({ user: expect.stringMatching(/^usr_/) });
  });

  it("refuses no token, another app's token and an altered one with 401", async () => {
    const altered = `${tokens.mine.slice(0, -4)}${tokens.mine.endsWith('AAAA') ? 'BBBB' : 'AAAA'}`;
    for (const token of [undefined, tokens.other, altered]) {
      const res = await me(token);
      expect(res.status).toBe(401);
      expect(res.headers.get('www-authenticate')).toBe('Bearer error="invalid_token"');
    }
  });
});
