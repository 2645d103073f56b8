import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { passwordHashingStats } from './auth/passwords.js';
import { firstStartAnnounced } from './bootstrap.js';
import { RETIRE_MESSAGE, runPrimary } from './cluster.js';
import { ConfigError, parseConfig, type ResolvedConfig } from './config.js';
import { listenMetrics } from './metrics/server.js';
import { resolveSecretKey } from './shared/secret-key.js';
import { lowerThreadPoolPriority } from './shared/thread-pool.js';

/** Parses the environment once; a bad value prints one line per problem and exits with code 2. */
export function loadConfig(env: Record<string, string | undefined>): ResolvedConfig {
  try {
    return resolveSecretKey(parseConfig(env), (msg) => process.stderr.write(`warning: ${msg}\n`));
  } catch (error) {
    if (error instanceof ConfigError) {
      for (const problem of error.problems) process.stderr.write(`config error: ${problem}\n`);
      process.exit(2);
    }
    throw error;
  }
}

/** How long a shutdown may take past its drain before the remaining connections are cut. */
export const SHUTDOWN_CAP_MS = 30_000;

/**
 * Serves until SIGTERM/SIGINT (docs/operations/deploy.md "Restarts without dropped requests"). SIGTERM:
 * /readyz answers 503 at once while requests are still served for SHUTDOWN_DRAIN_SECONDS, each answer
 * with `Connection: close`; then no new connection is accepted, idle ones are closed, the requests and
 * outbox deliveries in hand finish, the database is closed and the process exits 0 (cut off
 * SHUTDOWN_CAP_MS after the drain: exit 1). SIGINT (Ctrl-C) skips the drain. A cluster `worker` skips
 * what its primary already did (migrations, the first-start bootstrap, serving the metrics) and, when
 * its primary replaces it, drains without turning its readiness off: the other workers keep serving.
 */
export async function serve(config: ResolvedConfig, options: { worker?: boolean } = {}): Promise<FastifyInstance> {
  const app = await buildApp(config, { migrate: !options.worker });
  if (!options.worker) await firstStartAnnounced(app.db, config, app.clock.now());
  let metricsServer: FastifyInstance | undefined;
  let closing = false;
  const shutdown = (reason: string, drainMs: number, leave: boolean) => {
    if (closing) return;
    closing = true;
    app.lifecycle.draining = true;
    app.lifecycle.leaving = leave;
    app.log.info({ reason, drainMs }, 'shutting down');
    setTimeout(() => {
      const cap = setTimeout(() => {
        app.log.error({ capMs: SHUTDOWN_CAP_MS }, 'shutdown still waiting: closing the remaining connections');
        app.server.closeAllConnections();
        setTimeout(() => process.exit(1), 2000).unref();
      }, SHUTDOWN_CAP_MS);
      cap.unref();
      // An answer that began before the drain may still leave its connection open once idle.
      setInterval(() => app.server.closeIdleConnections(), 250).unref();
      Promise.all([app.close(), metricsServer?.close()]).then(
        () => process.exit(0),
        (err) => {
          app.log.error({ err }, 'error while shutting down');
          process.exit(1);
        },
      );
    }, drainMs);
  };
  process.once('SIGTERM', () => shutdown('SIGTERM', config.shutdownDrainMs, true));
  process.once('SIGINT', () => shutdown('SIGINT', 0, true));
  if (options.worker) process.on('message', (message) => message === RETIRE_MESSAGE && shutdown('replaced', config.shutdownDrainMs, false));
  // Ready first: the dummy password hash (onReady) has started libuv's pool by then.
  await app.ready();
  const pool = await lowerThreadPoolPriority();
  // Either way only a matter of latency under load, so not a warning.
  const passwordChecksAtOnce = passwordHashingStats().limit;
  if ('skipped' in pool) app.log.info({ reason: pool.skipped, passwordChecksAtOnce }, 'thread pool priority left as it was');
  else app.log.info({ ...pool, passwordChecksAtOnce }, "thread pool below the event loop's priority");
  await app.listen({ port: config.port, host: config.host });
  const metrics = app.metrics;
  if (metrics && !options.worker) metricsServer = await listenMetrics(config, () => metrics.metrics());
  return app;
}

/** `npm start` and `gatehouse serve`: one process, or a node:cluster primary and its workers (WORKERS > 1). */
export async function start(config: ResolvedConfig): Promise<void> {
  if (config.workers > 1 && cluster.isPrimary) await runPrimary(config);
  else await serve(config, { worker: cluster.isWorker });
}

const isEntry = process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href;
if (isEntry) {
  start(loadConfig(process.env)).catch((error) => {
    process.stderr.write(`fatal: ${error instanceof Error ? error.message : String(error)}\n`);
    process.exit(1);
  });
}
