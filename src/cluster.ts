import cluster, { type Worker } from 'node:cluster';
import { buildApp } from './app.js';
import { firstStartAnnounced } from './bootstrap.js';
import type { ResolvedConfig } from './config.js';
import { listenMetrics } from './metrics/server.js';
import { withServerFlags } from './node-flags.js';

const RESPAWN_DELAY_MS = 1000;

/**
 * The primary process of `WORKERS>1` (node:cluster): builds the app once (migrations, first signing
 * keys, first start), closes it, then forks the workers, which share the port and build the app with
 * `migrate: false`. A worker that dies is replaced; SIGTERM/SIGINT stop the workers gracefully. With
 * METRICS=1 the primary serves the metrics: each scrape asks every worker for its registry and sums
 * them (prom-client's AggregatorRegistry; src/metrics/index.ts).
 */
export async function runPrimary(config: ResolvedConfig): Promise<void> {
  const app = await buildApp(config);
  await firstStartAnnounced(app.db, config, app.clock.now());
  await app.close();

  // Workers run with the server's V8 flags even when this primary was started without them (`gatehouse serve`).
  cluster.setupPrimary({ execArgv: withServerFlags(process.execArgv) });
  const workers = new Set<Worker>();
  let stopping = false;
  const fork = () => workers.add(cluster.fork());
  cluster.on('exit', (worker, code, signal) => {
    workers.delete(worker);
    if (stopping) {
      if (workers.size === 0) process.exit(0);
      return;
    }
    process.stderr.write(`worker ${worker.process.pid} exited (${signal ?? code}); starting a new one\n`);
    setTimeout(() => stopping || fork(), RESPAWN_DELAY_MS);
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (workers.size === 0) process.exit(0);
    for (const worker of workers) worker.process.kill(signal);
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  for (let i = 0; i < config.workers; i++) fork();
  if (config.metrics) {
    const { AggregatorRegistry } = await import('prom-client');
    const workersMetrics = new AggregatorRegistry();
    await listenMetrics(config, () => workersMetrics.clusterMetrics());
  }
}
