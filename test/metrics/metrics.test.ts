import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';

describe('GET /metrics', () => {
  let on: TestApp;
  let off: TestApp;
  beforeAll(async () => {
    on = await buildTestApp({ env: { METRICS: '1' } });
    off = await buildTestApp();
  });
  afterAll(async () => {
    await on.close();
    await off.close();
  });

  it('is 404 unless METRICS=1', async () => {
    const res = await off.app.inject('/metrics');
    expect(res.statusCode).toBe(404);
    expect(res.json().code).toBe('not_found');
  });

  it('exposes request counters by route template (never raw URLs) and the outbox depth', async () => {
    await on.app.inject('/healthz');
    await on.app.inject('/oauth/authorize?client_id=nope&code=secret-looking-value');
    const res = await on.app.inject('/metrics');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.body).toMatch(/^gatehouse_http_requests_total\{method="GET",route="\/healthz",status="2xx"\} 1$/m);
    expect(res.body).toMatch(/^gatehouse_http_requests_total\{method="GET",route="\/oauth\/authorize",status="4xx"\} 1$/m);
    expect(res.body).toMatch(/^gatehouse_http_request_duration_seconds_count\{route="\/healthz"\} 1$/m);
    expect(res.body).toMatch(/^gatehouse_outbox_pending \d+$/m);
    // The argon2 queue (test/auth/abandoned-login.test.ts moves these).
    for (const gauge of ['limit', 'running', 'waiting']) expect(res.body).toMatch(new RegExp(`^# TYPE gatehouse_password_hashing_${gauge} gauge\\ngatehouse_password_hashing_${gauge} \\d+$`, 'm'));
    for (const counter of ['total', 'skipped_total', 'overdue_total']) expect(res.body).toMatch(new RegExp(`^# TYPE gatehouse_password_hashing_${counter} counter\\ngatehouse_password_hashing_${counter} \\d+$`, 'm'));
    expect(res.body).not.toContain('secret-looking-value');
  });
});
