import { describe, expect, it } from 'vitest';
import { epochSeconds } from '../../src/shared/time.js';
import { buildTestApp, FrozenClock } from '../helpers/app.js';
import { makeApp, makeUser } from '../helpers/factories.js';

// Time moves only when a test moves it (a frozen clock): no assertion depends on where the wall clock falls.
const frozenNow = () => new FrozenClock(epochSeconds());

describe('per-IP and mail limits', () => {
  it('answers 429 with Retry-After past IP_AUTH_PER_MINUTE, and again after the minute', async () => {
    const t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '5' }, clock: frozenNow() });
    try {
      const client = await makeApp(t.db);
      const codes: number[] = [];
      for (let i = 0; i < 6; i++) {
        const res = await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email: `x${i}@example.com`, client_id: client.id } });
        codes.push(res.statusCode);
        if (res.statusCode === 429) {
          expect(res.json()).toMatchObject({ code: 'rate_limited' });
          expect(Number(res.headers['retry-after'])).toBeGreaterThan(0);
          expect(res.json().retry_after).toBe(Number(res.headers['retry-after']));
        }
      }
      expect(codes).toEqual([202, 202, 202, 202, 202, 429]);
      // Spoofed forwarding headers do not reset the counter (TRUST_PROXY unset).
      const spoofed = await t.app.inject({ method: 'POST', url: '/v1/auth/login', headers: { 'x-forwarded-for': '9.9.9.9' }, payload: { email: 'a@example.com', password: 'whatever1', client_id: client.id } });
      expect(spoofed.statusCode).toBe(429);
      t.clock.advance(61);
      const later = await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email: 'y@example.com', client_id: client.id } });
      expect(later.statusCode).toBe(202);
    } finally {
      await t.close();
    }
  });

  it('limits mails per address and kind (interval and hourly), identically for known and unknown addresses; refusals do not count', async () => {
    const t = await buildTestApp({ env: { MAIL_PER_HOUR: '3', MAIL_INTERVAL_SECONDS: '60' }, clock: frozenNow() });
    try {
      const client = await makeApp(t.db);
      await makeUser(t.app, { email: 'known@example.com', password: 'known passphrase' });
      for (const email of ['known@example.com', 'unknown@example.com']) {
        const send = () => t.app.inject({ method: 'POST', url: '/v1/auth/magic-link/request', payload: { email, client_id: client.id } });
        expect((await send()).statusCode).toBe(202);
        const tooSoon = await send();
        expect(tooSoon.statusCode).toBe(429);
        expect(tooSoon.json().retry_after).toBe(60);
        t.clock.advance(61);
        expect((await send()).statusCode).toBe(202);
        t.clock.advance(61);
        expect((await send()).statusCode).toBe(202);
        t.clock.advance(61);
        const hourly = await send();
        expect(hourly.statusCode).toBe(429);
        expect(hourly.json().retry_after).toBeGreaterThan(3000);
        // Another kind has its own budget.
        expect((await t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', payload: { email, client_id: client.id } })).statusCode).toBe(202);
        t.clock.advance(3600);
        expect((await send()).statusCode).toBe(202);
      }
      const sent = await t.db.selectFrom('outbox').select(['kind', 'to_address']).execute();
      expect(sent.filter((m) => m.kind === 'magic_link' && m.to_address === 'known@example.com')).toHaveLength(4);
      expect(sent.filter((m) => m.to_address === 'unknown@example.com')).toHaveLength(0);
    } finally {
      await t.close();
    }
  });

  it.skipIf(!process.env.TEST_REDIS_URL)('shares the per-IP counter through Redis (TEST_REDIS_URL)', async () => {
    const env = { IP_AUTH_PER_MINUTE: '3', REDIS_URL: process.env.TEST_REDIS_URL! };
    const a = await buildTestApp({ env, clock: frozenNow() });
    const b = await buildTestApp({ env, clock: frozenNow() });
    try {
      const clientA = await makeApp(a.db);
      const clientB = await makeApp(b.db);
      // Unique IP per run so earlier runs' keys in a shared Redis do not interfere.
      const ip = `10.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}.${Math.floor(Math.random() * 250)}`;
      const hit = (t: typeof a, clientId: string) =>
        t.app.inject({ method: 'POST', url: '/v1/auth/password/forgot', remoteAddress: ip, payload: { email: 'r@example.com', client_id: clientId } });
      const codes = [await hit(a, clientA.id), await hit(b, clientB.id), await hit(a, clientA.id), await hit(b, clientB.id)].map((r) => r.statusCode);
      expect(codes.slice(0, 3).every((c) => c === 202 || c === 429)).toBe(true);
      expect(codes[3]).toBe(429);
    } finally {
      await a.close();
      await b.close();
    }
  });
});
