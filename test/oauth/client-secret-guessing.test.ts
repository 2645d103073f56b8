import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FAILED_SECRETS_PER_MINUTE } from '../../src/sign-in/client-auth.js';
import { epochSeconds } from '../../src/shared/time.js';
import { buildTestApp, FrozenClock, type TestApp } from '../helpers/app.js';
import { makeClient, tokenRequest, type TestClient } from '../helpers/oauth-flows.js';

// docs/security/checklist.md#brute-force-and-rate-limits: client-secret guessing is throttled per app and IP; once over the limit, even the right
// secret is refused from that IP until the window is over (elsewhere it keeps working).
describe('client secret guessing at /oauth/token', () => {
  let t: TestApp;
  let client: TestClient;
  const basic = (secret: string) => ({ authorization: `Basic ${Buffer.from(`${encodeURIComponent(client.app.id)}:${encodeURIComponent(secret)}`).toString('base64')}` });
  const withSecret = (secret: string) => tokenRequest(t.app, { grant_type: 'refresh_token', refresh_token: 'rt_unknown' }, basic(secret));

  beforeAll(async () => {
    // A frozen clock: the whole burst is inside one minute however slowly the machine runs it.
    t = await buildTestApp({ clock: new FrozenClock(epochSeconds()) });
    client = await makeClient(t, { type: 'confidential' });
  });
  afterAll(async () => t.close());

  it('answers 401 invalid_client, then 429 with Retry-After, the right secret included; other IPs are not affected', async () => {
    for (let i = 0; i < MAX_FAILED_SECRETS_PER_MINUTE; i++) {
      const res = await withSecret(`cs_wrong-${i}`);
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    }
    const limited = await withSecret('cs_wrong-again');
    expect(limited.statusCode).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect(limited.headers['cache-control']).toBe('no-store');

    // From the guessing IP the real secret is refused too; from another IP it authenticates (the grant
    // itself is unknown → invalid_grant, not invalid_client).
    expect((await withSecret(client.secret!)).statusCode).toBe(429);
    const elsewhere = await t.app.inject({
      method: 'POST',
      url: '/oauth/token',
      remoteAddress: '198.51.100.20',
      headers: { 'content-type': 'application/x-www-form-urlencoded', ...basic(client.secret!) },
      payload: new URLSearchParams({ grant_type: 'refresh_token', refresh_token: 'rt_unknown' }).toString(),
    });
    expect(elsewhere.json().error).toBe('invalid_grant');

    t.clock.advance(61);
    const right = await withSecret(client.secret!);
    expect(right.statusCode).toBe(400);
    expect(right.json().error).toBe('invalid_grant');
    expect((await withSecret('cs_wrong-later')).statusCode).toBe(401);
  });
});
