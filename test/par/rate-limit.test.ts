import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { MAX_FAILED_PAR_AUTH_PER_MINUTE, MAX_PUSHED_REQUESTS_PER_MINUTE } from '../../src/oauth/par.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { countAll } from '../helpers/db.js';
import { makeClient, pkcePair, type TestClient } from '../helpers/oauth-flows.js';

/**
 * The per-IP limits of `POST /oauth/par` (docs/reference/oauth.md#pushed-authorization-requests-rfc-9126).
 * The attacks: guessing client secrets across many client ids from one address (the per-app limit of
 * client-auth.ts never trips), and filling `pushed_authorization_requests` from one address.
 */

describe('POST /oauth/par per-IP limits', () => {
  let t: TestApp;
  let spa: TestClient;
  let backend: TestClient;

  beforeAll(async () => {
    t = await buildTestApp();
    spa = await makeClient(t, { name: 'PAR SPA' });
    backend = await makeClient(t, { name: 'PAR backend', type: 'confidential' });
  });
  afterAll(async () => t?.close());

  const push = (ip: string, body: Record<string, string>) =>
    t.app.inject({ method: 'POST', url: '/oauth/par', remoteAddress: ip, headers: { 'content-type': 'application/x-www-form-urlencoded' }, payload: new URLSearchParams(body).toString() });
  const request = (client: TestClient) => ({
    client_id: client.app.id,
    response_type: 'code',
    redirect_uri: client.app.redirectUris[0]!,
    code_challenge: pkcePair().challenge,
    code_challenge_method: 'S256',
    ...(client.secret ? { client_secret: client.secret } : {}),
  });

  it('failed client authentications from one IP, over any client ids, lock that IP out, right secret included', async () => {
    const ip = '203.0.113.10';
    for (let i = 0; i < MAX_FAILED_PAR_AUTH_PER_MINUTE; i++) {
      // A different (unknown or real) client each time: the per-app limit alone would not see it.
      const clientId = i % 2 === 0 ? `app_guess${i}` : backend.app.id;
      const res = await push(ip, { ...request(backend), client_id: clientId, client_secret: `cs_wrong${i}` });
      expect(res.statusCode).toBe(401);
      expect(res.json().error).toBe('invalid_client');
    }
    const before = await countAll(t.db, 'pushed_authorization_requests');
    const locked = await push(ip, request(backend));
    expect(locked.statusCode).toBe(429);
    expect(locked.json().error).toBe('rate_limited');
    expect(await countAll(t.db, 'pushed_authorization_requests')).toBe(before);
    // Another address is not affected, and a minute later this one is free again.
    expect((await push('203.0.113.11', request(backend))).statusCode).toBe(201);
    t.clock.advance(61);
    try {
      expect((await push(ip, request(backend))).statusCode).toBe(201);
    } finally {
      t.clock.advance(-61);
    }
  });

  it('at most MAX_PUSHED_REQUESTS_PER_MINUTE pushes per IP, whatever their outcome', async () => {
    const ip = '203.0.113.20';
    const bad = { ...request(spa), redirect_uri: 'https://evil.example/cb' };
    for (let i = 0; i < MAX_PUSHED_REQUESTS_PER_MINUTE - 1; i++) expect((await push(ip, bad)).statusCode).toBe(400);
    expect((await push(ip, request(spa))).statusCode).toBe(201);
    const before = await countAll(t.db, 'pushed_authorization_requests');
    const over = await push(ip, request(spa));
    expect(over.statusCode).toBe(429);
    expect(over.json().error).toBe('rate_limited');
    expect(await countAll(t.db, 'pushed_authorization_requests')).toBe(before);
    expect((await push('203.0.113.21', request(spa))).statusCode).toBe(201);
  });
});
