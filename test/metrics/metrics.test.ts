import type { FastifyInstance } from 'fastify';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError } from '../../src/config.js';
import { buildMetricsServer } from '../../src/metrics/server.js';
import { buildTestApp, testConfig, type TestApp } from '../helpers/app.js';

/**
 * The metrics a process collects (METRICS=1) and the server that answers a scrape (src/metrics/server.ts,
 * on METRICS_PORT), in process. test/metrics/scrape.test.ts starts real servers: one process, and a
 * WORKERS=2 cluster whose primary sums its workers.
 */

const METRICS_TOKEN = 'metrics-token-0123456789abcdef-0123456789';

describe('metrics', () => {
  let on: TestApp;
  let off: TestApp;
  let scrapes: FastifyInstance;
  let guarded: FastifyInstance;
  beforeAll(async () => {
    on = await buildTestApp({ env: { METRICS: '1' } });
    off = await buildTestApp();
    scrapes = await buildMetricsServer(on.config, () => on.app.metrics!.metrics());
    guarded = await buildMetricsServer(testConfig({ METRICS: '1', METRICS_TOKEN }), () => on.app.metrics!.metrics());
  });
  afterAll(async () => {
    await on.close();
    await off.close();
    await scrapes.close();
    await guarded.close();
  });

  it('are never served on the API, METRICS=1 or not; with METRICS off nothing is collected', async () => {
    for (const t of [on, off]) {
      const res = await t.app.inject('/metrics');
      expect(res.statusCode).toBe(404);
      expect(res.json()).toMatchObject({ code: 'not_found' });
    }
    expect(off.app.metrics).toBeNull();
  });

  it('count requests by route template (never raw URLs), with the outbox depth, the argon2 queue and the process metrics', async () => {
    await on.app.inject('/healthz');
    await on.app.inject('/oauth/authorize?client_id=nope&code=secret-looking-value');
    const res = await scrapes.inject('/metrics');
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/^text\/plain; version=0\.0\.4/);
    expect(res.headers['cache-control']).toBe('no-store');
    expect(res.body).toMatch(/^gatehouse_http_requests_total\{method="GET",route="\/healthz",status="2xx"\} 1$/m);
    expect(res.body).toMatch(/^gatehouse_http_requests_total\{method="GET",route="\/oauth\/authorize",status="4xx"\} 1$/m);
    expect(res.body).toMatch(/^gatehouse_http_request_duration_seconds_count\{route="\/healthz"\} 1$/m);
    expect(res.body).toMatch(/^# TYPE gatehouse_http_requests_abandoned_total counter$/m);
    expect(res.body).toMatch(/^gatehouse_outbox_pending \d+$/m);
    // The argon2 queue (test/auth/abandoned-login.test.ts moves these).
    for (const gauge of ['limit', 'running', 'waiting']) expect(res.body).toMatch(new RegExp(`^# TYPE gatehouse_password_hashing_${gauge} gauge\\ngatehouse_password_hashing_${gauge} \\d+$`, 'm'));
    for (const counter of ['total', 'skipped_total', 'overdue_total']) expect(res.body).toMatch(new RegExp(`^# TYPE gatehouse_password_hashing_${counter} counter\\ngatehouse_password_hashing_${counter} \\d+$`, 'm'));
    // Node's own: CPU, resident memory, event-loop lag, GC, handles.
    for (const series of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_active_handles_total']) {
      expect(res.body).toMatch(new RegExp(`^${series} [\\d.e+-]+$`, 'm'));
    }
    expect(res.body).toMatch(/^# TYPE nodejs_gc_duration_seconds histogram$/m);
    expect(res.body).not.toContain('secret-looking-value');
  });

  it('with METRICS_TOKEN: only that bearer token is answered; anything else is 401 in the JSON error shape', async () => {
    const attempts: Array<Record<string, string>> = [{}, { authorization: `Bearer ${METRICS_TOKEN.slice(0, -1)}x` }, { authorization: `Basic ${METRICS_TOKEN}` }, { authorization: 'Bearer not-the-metrics-token-0123456789abcdef' }];
    for (const headers of attempts) {
      const res = await guarded.inject({ url: '/metrics', headers });
      expect(res.statusCode, JSON.stringify(headers)).toBe(401);
      expect(res.headers['content-type']).toMatch(/^application\/json/);
      expect(Object.keys(res.json()).sort()).toEqual(['code', 'message']);
      expect(res.json().code).toBe('unauthorized');
      expect(res.body).not.toContain('gatehouse_');
    }
    const ok = await guarded.inject({ url: '/metrics', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(ok.statusCode).toBe(200);
    expect(ok.body).toMatch(/^gatehouse_outbox_pending \d+$/m);
    const elsewhere = await guarded.inject({ url: '/', headers: { authorization: `Bearer ${METRICS_TOKEN}` } });
    expect(elsewhere.statusCode).toBe(404);
    expect(elsewhere.json()).toMatchObject({ code: 'not_found' });
  });

  it.each<{ env: Record<string, string>; problem: RegExp }>([
    { env: { METRICS: '1', METRICS_HOST: '0.0.0.0' }, problem: /^METRICS_TOKEN: required when METRICS_HOST is not a loopback address$/ },
    { env: { METRICS: '1', PORT: '9464' }, problem: /^METRICS_PORT: must differ from PORT/ },
    { env: { METRICS: '1', METRICS_TOKEN: 'short' }, problem: /^METRICS_TOKEN: METRICS_TOKEN must be at least 32 characters$/ },
  ])('refuses the configuration $env', ({ env, problem }) => {
    let error: unknown;
    try {
      testConfig(env);
    } catch (caught) {
      error = caught;
    }
    expect(error).toBeInstanceOf(ConfigError);
    expect((error as ConfigError).problems).toEqual([expect.stringMatching(problem)]);
  });

  it('accepts a non-loopback METRICS_HOST with a token, and ignores the metrics settings with METRICS off', () => {
    expect(testConfig({ METRICS: '1', METRICS_HOST: '0.0.0.0', METRICS_TOKEN, METRICS_PORT: '9100' }).metrics).toEqual({ host: '0.0.0.0', port: 9100, token: METRICS_TOKEN });
    expect(testConfig({ METRICS_HOST: '0.0.0.0', PORT: '9464' }).metrics).toBeUndefined();
  });
});
