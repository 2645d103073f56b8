import cluster from 'node:cluster';
import type { FastifyInstance } from 'fastify';
import { buildApp } from './app.js';
import { passwordHashingStats } from './auth/passwords.js';
import { firstStartAnnounced } from './bootstrap.js';
import { runPrimary } from './cluster.js';
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

/**
 * Serves until SIGTERM/SIGINT; then in-flight requests finish and the database is closed. A cluster
 * `worker` skips what its primary already did: migrations, the first-start bootstrap and serving the
 * metrics (with METRICS=1, on their own port).
 */
export async function serve(config: ResolvedConfig, options: { worker?: boolean } = {}): Promise<FastifyInstance> {
  const app = await buildApp(config, { migrate: !options.worker });
  if (!options.worker) await firstStartAnnounced(app.db, config, app.clock.now());
  let metricsServer: FastifyInstance | undefined;
  let closing = false;
  const shutdown = (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    Promise.all([app.close(), metricsServer?.close()]).then(
      () => process.exit(0),
      (err) => {
        app.log.error({ err }, 'error while shutting down');
        process.exit(1);
      },
    );
  };
  process.once('SIGTERM', () => shutdown('SIGTERM'));
  process.once('SIGINT', () => shutdown('SIGINT'));
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
