import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FAILED_GRANTS_PER_MINUTE } from '../../src/oauth/token.js';
import { epochSeconds } from '../../src/shared/time.js';
import { buildTestApp, FrozenClock, type TestApp } from '../helpers/app.js';
import { makeClient, tokenRequest, type TestClient } from '../helpers/oauth-flows.js';

// docs/security/checklist.md#authorization-codes-and-the-authorize-endpoint: random codes are all invalid_grant, then throttled; never 5xx.
describe('guessing authorization codes at /oauth/token', () => {
  let t: TestApp;
  let client: TestClient;
  beforeAll(async () => {
    // A frozen clock: the whole burst is inside one minute however slowly the machine runs it.
    t = await buildTestApp({ clock: new FrozenClock(epochSeconds()) });
    client = await makeClient(t);
  });
  afterAll(async () => t.close());

  const guess = () =>
    tokenRequest(t.app, {
      grant_type: 'authorization_code',
      code: `ac_${randomBytes(32).toString('base64url')}`,
      redirect_uri: client.app.redirectUris[0]!,
      client_id: client.app.id,
      code_verifier: randomBytes(32).toString('base64url'),
    });

  it('answers invalid_grant, then 429 with Retry-After, and recovers after the window', async () => {
    const statuses: number[] = [];
    for (let i = 0; i < 2000; i++) statuses.push((await guess()).statusCode);
    expect(statuses.every((s) => s < 500)).toBe(true);
    expect(statuses.slice(0, MAX_FAILED_GRANTS_PER_MINUTE).every((s) => s === 400)).toBe(true);
    expect(statuses.slice(MAX_FAILED_GRANTS_PER_MINUTE).every((s) => s === 429)).toBe(true);
    const limited = await guess();
    expect(limited.json().error).toBe('rate_limited');
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);

    t.clock.advance(61);
    const later = await guess();
    expect(later.statusCode).toBe(400);
    expect(later.json().error).toBe('invalid_grant');
  });
});
