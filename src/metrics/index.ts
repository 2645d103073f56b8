import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import cluster from 'node:cluster';
import type { PrometheusContentType, Registry } from 'prom-client';
import { passwordHashingStats } from '../auth/index.js';
import { whenClientLeaves } from '../shared/request-context.js';

/**
 * This process's Prometheus metrics (prom-client), collected only with METRICS=1 and served by
 * `./server.ts` on their own port, never by the API. Node's process metrics (CPU, resident memory,
 * event-loop lag, GC, handles) and the service's own: requests by route template and status class —
 * never the raw URL, which could carry codes or tokens and would explode the label set — and their
 * durations; requests whose client left before the answer, counted apart (they have no status, and
 * their duration is the client's patience, not the server's); the mail outbox depth, which shows
 * whether SMTP keeps up; and the argon2 queue, which shows a login flood (and how much of it was
 * skipped because its clients had left or it had waited over its bound).
 *
 * In a cluster worker (WORKERS>1) the registry answers the primary's scrape (src/cluster.ts), which
 * sums the workers' counters and histograms; the process metrics carry the worker's `pid`, so each
 * worker's stay apart.
 */

const DURATION_BUCKETS = [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10];

declare module 'fastify' {
  interface FastifyInstance {
    /** This process's metrics; null when METRICS is off. */
    metrics: Registry | null;
  }
}

async function metricsPlugin(app: FastifyInstance) {
  if (!app.config.metrics) {
    app.decorate('metrics', null);
    return;
  }
  // Loaded only by servers that collect metrics (~6 MB resident).
  const { AggregatorRegistry, collectDefaultMetrics, Counter, Gauge, Histogram, Registry } = await import('prom-client');
  // Constructing an AggregatorRegistry is what makes a worker answer the primary's requests.
  const registry = cluster.isWorker ? new AggregatorRegistry<PrometheusContentType>() : new Registry();
  if (cluster.isWorker) AggregatorRegistry.setRegistries(registry);
  collectDefaultMetrics({ register: registry, ...(cluster.isWorker && { labels: { pid: String(process.pid) } }) });
  const registers = [registry];

  const requests = new Counter({ name: 'gatehouse_http_requests_total', help: 'HTTP requests by method, route template and status class.', labelNames: ['method', 'route', 'status'], registers });
  const abandoned = new Counter({
    name: 'gatehouse_http_requests_abandoned_total',
    help: 'HTTP requests whose client closed the connection before they were answered (nginx logs 499), by method and route template; not in gatehouse_http_requests_total.',
    labelNames: ['method', 'route'],
    registers,
  });
  const durations = new Histogram({ name: 'gatehouse_http_request_duration_seconds', help: 'Request duration by route template.', labelNames: ['route'], buckets: DURATION_BUCKETS, registers });
  // Callback style: an async hook costs every request a promise.
  app.addHook('onRequest', (request, reply, done) => {
    whenClientLeaves(reply, () => abandoned.inc({ method: request.method, route: request.routeOptions.url ?? 'unmatched' }));
    done();
  });
  app.addHook('onResponse', (request, reply, done) => {
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status: `${Math.floor(reply.statusCode / 100)}xx` });
    durations.observe({ route }, reply.elapsedTime / 1000);
    done();
  });

  // One database for every worker: the cluster's scrape shows the depth once, not once per worker.
  new Gauge({ name: 'gatehouse_outbox_pending', help: 'Mails waiting in the outbox for delivery.', aggregator: 'max', registers, async collect() { this.set(await app.mailer.pending()); } });
  // The password line counts for itself (auth/passwords.ts); these read it at each scrape.
  const hashing: Array<[name: string, help: string, read: (stats: ReturnType<typeof passwordHashingStats>) => number]> = [
    ['limit', "argon2id computations allowed to run at once: one per core plus one, and one fewer than libuv's thread pool has threads.", (s) => s.limit],
    ['running', 'argon2id computations (password checks and hashes) running now.', (s) => s.running],
    ['waiting', 'argon2id computations waiting for a turn (gatehouse_password_hashing_limit run at once).', (s) => s.waiting],
  ];
  for (const [name, help, read] of hashing) new Gauge({ name: `gatehouse_password_hashing_${name}`, help, registers, collect() { this.set(read(passwordHashingStats())); } });
  const hashingCounts: typeof hashing = [
    ['total', 'argon2id computations run since the start.', (s) => s.done],
    ['skipped_total', 'argon2id computations not run because their client had closed the connection before their turn.', (s) => s.skipped],
    ['overdue_total', 'argon2id computations not run because they had waited over PASSWORD_MAX_WAIT_MS for their turn (answered 503).', (s) => s.overdue],
  ];
  for (const [name, help, read] of hashingCounts) {
    new Counter({ name: `gatehouse_password_hashing_${name}`, help, registers, collect() { this.reset(); this.inc(read(passwordHashingStats())); } });
  }
  app.decorate('metrics', registry);
}

/** App-wide (fp), so the request hooks see every route; register it before the features. */
export default fp(metricsPlugin, { name: 'metrics', dependencies: ['db', 'mailer'] });
