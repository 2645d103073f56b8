import { execFile } from 'node:child_process';
import type { AddressInfo } from 'node:net';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { addMember, quickUser } from '../helpers/members.js';

/** The user-listing quickstart (docs/quickstart/list-users.md) runs as written, against a started server. */
describe('quickstart: a developer lists the users of an app', () => {
  let t: TestApp;
  let env: Record<string, string>;

  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '10000' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    const developer = await createDeveloperViaApi(t);
    const appId = (await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody({ name: 'Listed' }) })).json().id as string;
    // 130 users of the app (more than one page of 100); three of them at bakery.example.
    for (let i = 0; i < 130; i++) {
      const user = await quickUser(t, { email: i < 3 ? `baker${i}@bakery.example` : `person${i}@example.com` });
      await addMember(t, { id: appId } as never, user);
    }
    const { port } = t.app.server.address() as AddressInfo;
    env = { GATEHOUSE_URL: `http://127.0.0.1:${port}`, DEVELOPER_KEY: developer.apiKey, APP_ID: appId };
  });
  afterAll(async () => t?.close());

  it('pages through everyone, searches, and blocks the first match', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['examples/list-users/index.mjs', 'bakery.example'], { env: { ...process.env, ...env }, timeout: 60_000 });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toBe('130 users');
    expect(lines[1]).toBe('3 active users match "bakery.example"');
    expect(lines[2]).toMatch(/^baker[0-2]@bakery\.example is now blocked$/);
  });
});
