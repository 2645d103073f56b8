import Fastify, { type FastifyInstance, type FastifyServerOptions } from 'fastify';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import errorHandler from '../plugins/error-handler.js';
import { loggerOptions } from '../plugins/logger.js';
import routeListPlugin from '../plugins/route-list.js';
import { bearerCredential } from '../shared/bearer.js';
import { safeEqual } from '../shared/ids.js';

/** Prometheus' text exposition format 0.0.4 (prom-client's `Registry.PROMETHEUS_CONTENT_TYPE`). */
const PROMETHEUS_TEXT = 'text/plain; version=0.0.4; charset=utf-8';

/**
 * `GET /metrics` on METRICS_PORT (METRICS_HOST, loopback by default), never on the API's port: one
 * process serves its own registry (src/server.ts), a cluster's primary the sum of its workers'
 * (src/cluster.ts). With METRICS_TOKEN set, only `Authorization: Bearer <token>` (compared in constant
 * time) is answered; anything else is 401 `unauthorized`, and any other path 404 `not_found`, in the
 * API's JSON error shape.
 */
export async function buildMetricsServer(config: Config, scrape: () => Promise<string>, logger: FastifyServerOptions['logger'] = false): Promise<FastifyInstance> {
  const token = config.metrics?.token;
  const server = Fastify({ logger });
  await server.register(routeListPlugin);
  await server.register(errorHandler, { issuer: config.baseUrl, production: config.production });
  server.get('/metrics', async (request, reply) => {
    if (token && !safeEqual(bearerCredential(request.headers.authorization ?? '') ?? '', token)) {
      throw new AppError('unauthorized', { detail: request.headers.authorization ? 'wrong metrics token' : 'no metrics token' });
    }
    return reply.type(PROMETHEUS_TEXT).header('cache-control', 'no-store').send(await scrape());
  });
  return server;
}

/** Builds the metrics server and listens on METRICS_HOST:METRICS_PORT (METRICS=1 only); the caller closes it. */
export async function listenMetrics(config: Config, scrape: () => Promise<string>): Promise<FastifyInstance> {
  const { port, host } = config.metrics!;
  const server = await buildMetricsServer(config, scrape, loggerOptions(config.logLevel));
  await server.listen({ port, host });
  return server;
}
