import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { text } from '../shared/responses.js';
import { AppError } from '../errors.js';
import { passwordHashingStats } from '../auth/passwords.js';
import { whenClientLeaves } from '../shared/request-context.js';

/**
 * `GET /metrics` (CONTRACT §0): Prometheus text exposition, served only with METRICS=1 (404 otherwise).
 * Requests are labelled by route template and status class — never the raw URL, which could carry
 * codes or tokens and would explode the label set. Requests whose client left before the answer are
 * counted apart: they have no status, and their duration is the client's patience, not the server's.
 * The mail outbox depth shows whether SMTP keeps up;
 * the argon2 queue shows a login flood (and how much of it was skipped because its clients had left
 * or it had waited over its bound).
 */

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

interface RouteSeries {
  count: number;
  sum: number;
  buckets: number[];
}

/** Escapes a Prometheus label value. */
const label = (value: string) => value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n');

export class RequestMetrics {
  private readonly requests = new Map<string, number>();
  private readonly durations = new Map<string, RouteSeries>();
  private readonly abandoned = new Map<string, number>();

  observe(method: string, route: string, status: number, seconds: number): void {
    const key = `${method} ${route} ${Math.floor(status / 100)}xx`;
    this.requests.set(key, (this.requests.get(key) ?? 0) + 1);
    const series = this.durations.get(route) ?? { count: 0, sum: 0, buckets: DURATION_BUCKETS.map(() => 0) };
    series.count += 1;
    series.sum += seconds;
    DURATION_BUCKETS.forEach((bound, i) => {
      if (seconds <= bound) series.buckets[i]! += 1;
    });
    this.durations.set(route, series);
  }

  /** A request whose client closed the connection before it was answered. */
  observeAbandoned(method: string, route: string): void {
    const key = `${method} ${route}`;
    this.abandoned.set(key, (this.abandoned.get(key) ?? 0) + 1);
  }

  render(scalars: Record<string, { help: string; type: 'gauge' | 'counter'; value: number }>): string {
    const lines = ['# HELP gatehouse_http_requests_total HTTP requests by method, route template and status class.', '# TYPE gatehouse_http_requests_total counter'];
    for (const [key, value] of this.requests) {
      const [method, route, status] = key.split(' ');
      lines.push(`gatehouse_http_requests_total{method="${method}",route="${label(route!)}",status="${status}"} ${value}`);
    }
    lines.push(
      '# HELP gatehouse_http_requests_abandoned_total HTTP requests whose client closed the connection before they were answered (nginx logs 499), by method and route template; not in gatehouse_http_requests_total.',
      '# TYPE gatehouse_http_requests_abandoned_total counter',
    );
    for (const [key, value] of this.abandoned) {
      const [method, route] = key.split(' ');
      lines.push(`gatehouse_http_requests_abandoned_total{method="${method}",route="${label(route!)}"} ${value}`);
    }
    lines.push('# HELP gatehouse_http_request_duration_seconds Request duration by route template.', '# TYPE gatehouse_http_request_duration_seconds histogram');
    for (const [route, series] of this.durations) {
      const r = label(route);
      DURATION_BUCKETS.forEach((bound, i) => lines.push(`gatehouse_http_request_duration_seconds_bucket{route="${r}",le="${bound}"} ${series.buckets[i]}`));
      lines.push(`gatehouse_http_request_duration_seconds_bucket{route="${r}",le="+Inf"} ${series.count}`);
      lines.push(`gatehouse_http_request_duration_seconds_sum{route="${r}"} ${series.sum}`);
      lines.push(`gatehouse_http_request_duration_seconds_count{route="${r}"} ${series.count}`);
    }
    for (const [name, one] of Object.entries(scalars)) lines.push(`# HELP ${name} ${one.help}`, `# TYPE ${name} ${one.type}`, `${name} ${one.value}`);
    return `${lines.join('\n')}\n`;
  }
}

async function metricsPlugin(app: FastifyInstance) {
  const metrics = new RequestMetrics();
  if (app.config.metrics) {
    // Callback style: an async hook costs every request a promise.
    app.addHook('onRequest', (request, reply, done) => {
      whenClientLeaves(reply, () => metrics.observeAbandoned(request.method, request.routeOptions.url ?? 'unmatched'));
      done();
    });
    app.addHook('onResponse', async (request, reply) => {
      metrics.observe(request.method, request.routeOptions.url ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
    });
  }

  app.get(
    '/metrics',
    {
      schema: {
        operationId: 'getMetrics',
        tags: ['operations'],
        summary: 'Prometheus metrics',
        description: 'Only with METRICS=1; otherwise 404.',
        response: { 200: text('Prometheus text exposition format 0.0.4.', 'text/plain') },
        errors: { 404: ['not_found'] },
      },
    },
    async (_request, reply) => {
      if (!app.config.metrics) throw new AppError('not_found', { detail: 'metrics are off (METRICS=1 turns them on)' });
      const memory = process.memoryUsage();
      const hashing = passwordHashingStats();
      const body = metrics.render({
        gatehouse_outbox_pending: { help: 'Mails waiting in the outbox for delivery.', type: 'gauge', value: await app.mailer.pending() },
        gatehouse_password_hashing_limit: { help: 'argon2id computations allowed to run at once: one per core plus one, and one fewer than libuv\'s thread pool has threads.', type: 'gauge', value: hashing.limit },
        gatehouse_password_hashing_running: { help: 'argon2id computations (password checks and hashes) running now.', type: 'gauge', value: hashing.running },
        gatehouse_password_hashing_waiting: { help: 'argon2id computations waiting for a turn (gatehouse_password_hashing_limit run at once).', type: 'gauge', value: hashing.waiting },
        gatehouse_password_hashing_total: { help: 'argon2id computations run since the start.', type: 'counter', value: hashing.done },
        gatehouse_password_hashing_skipped_total: { help: 'argon2id computations not run because their client had closed the connection before their turn.', type: 'counter', value: hashing.skipped },
        gatehouse_password_hashing_overdue_total: { help: 'argon2id computations not run because they had waited over PASSWORD_MAX_WAIT_MS for their turn (answered 503).', type: 'counter', value: hashing.overdue },
        gatehouse_process_uptime_seconds: { help: 'Seconds since the process started.', type: 'gauge', value: Math.round(process.uptime()) },
        gatehouse_process_heap_used_bytes: { help: 'V8 heap in use.', type: 'gauge', value: memory.heapUsed },
      });
      return reply.type('text/plain; version=0.0.4; charset=utf-8').header('cache-control', 'no-store').send(body);
    },
  );
}

/** App-wide (fp), so the request hook sees every route; register it before the features. */
export default fp(metricsPlugin, { name: 'metrics', dependencies: ['db', 'mailer'] });
