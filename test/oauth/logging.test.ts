import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { authorizeAndGetCode, Browser, exchangeCode, makeClient, refresh, userinfo } from '../helpers/oauth-flows.js';

describe('item 91: secrets of the OAuth flow never reach the logs', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ env: { LOG_LEVEL: 'trace' } });
  });
  afterAll(async () => t.close());

  it('passwords, codes, verifiers, tokens, client secrets and session cookies are absent', async () => {
    const pub = await makeClient(t);
    const conf = await makeClient(t, { type: 'confidential', redirectUris: ['https://c.example/cb'] });
    const b = new Browser(t.app);
    const { password } = await b.register();
    const secrets: string[] = [password, conf.secret!, b.sessionCookie()!];
    for (const client of [pub, conf]) {
      const { code, verifier } = await authorizeAndGetCode(b, client, { state: 'state-canary-123', extra: { nonce: 'nonce-canary-456' } });
      const tokens = (await exchangeCode(t.app, client, code, verifier)).json();
      const next = (await refresh(t.app, client, tokens.refresh_token)).json();
      await userinfo(t.app, tokens.access_token);
      await exchangeCode(t.app, client, code, verifier); // replay: logged as an event, never the code
      secrets.push(code, tokens.access_token, tokens.refresh_token, tokens.id_token, next.refresh_token, next.access_token);
      if (verifier) secrets.push(verifier);
    }
    secrets.push(b.sessionCookie()!, 'state-canary-123', 'nonce-canary-456');
    expect(secrets.every((s) => typeof s === 'string' && s.length > 8)).toBe(true);
    const logs = t.logs.join('\n');
    expect(logs.length).toBeGreaterThan(1000);
    for (const secret of secrets) expect(logs.includes(secret), secret.slice(0, 12)).toBe(false);
    const events = JSON.stringify(await t.db.selectFrom('events').selectAll().execute());
    for (const secret of secrets) expect(events.includes(secret)).toBe(false);
  });
});
