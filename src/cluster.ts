import cluster, { type Worker } from 'node:cluster';
import { buildApp } from './app.js';
import { firstStartAnnounced } from './bootstrap.js';
import type { ResolvedConfig } from './config.js';
import { listenMetrics } from './metrics/server.js';
import { withServerFlags } from './node-flags.js';

const RESPAWN_DELAY_MS = 1000;

/** The message the primary sends a worker it is replacing: drain and exit (server.ts). */
export const RETIRE_MESSAGE = 'gatehouse:retire';

/**
 * The primary process of `WORKERS>1` (node:cluster): builds the app once (migrations, first signing
 * keys, first start), closes it, then forks the workers, which share the port and build the app with
 * `migrate: false`. A worker that dies is replaced. SIGTERM/SIGINT go to every worker, which drain and
 * exit (server.ts); the primary exits 0 after the last. SIGHUP replaces the workers one at a time, each
 * new one listening before the old one drains (docs/operations/deploy.md). With METRICS=1 the primary
 * serves the metrics: each scrape asks every worker for its registry and sums them (prom-client's
 * AggregatorRegistry; src/metrics/index.ts).
 */
export async function runPrimary(config: ResolvedConfig): Promise<void> {
  const app = await buildApp(config);
  await firstStartAnnounced(app.db, config, app.clock.now());
  await app.close();

  // Workers run with the server's V8 flags even when this primary was started without them (`gatehouse serve`).
  cluster.setupPrimary({ execArgv: withServerFlags(process.execArgv) });
  const workers = new Set<Worker>();
  /** Workers told to drain by a SIGHUP: their exit is expected, not replaced. */
  const retiring = new Set<Worker>();
  let stopping = false;
  let replacing = false;
  const fork = () => {
    const worker = cluster.fork();
    workers.add(worker);
    return worker;
  };
  cluster.on('exit', (worker, code, signal) => {
    workers.delete(worker);
    if (stopping) {
      if (workers.size === 0) process.exit(0);
      return;
    }
    if (retiring.delete(worker)) return;
    process.stderr.write(`worker ${worker.process.pid} exited (${signal ?? code}); starting a new one\n`);
    setTimeout(() => stopping || fork(), RESPAWN_DELAY_MS);
  });
  const stop = (signal: NodeJS.Signals) => {
    if (stopping) return;
    stopping = true;
    if (workers.size === 0) process.exit(0);
    for (const worker of workers) worker.process.kill(signal);
  };
  /** One worker after another: a new one is forked and listening before the old one is told to drain, and has exited before the next. */
  const replaceAll = async () => {
    for (const old of [...workers]) {
      if (stopping) return;
      if (!workers.has(old)) continue; // died meanwhile, and was replaced by a new one already
      const fresh = fork();
      const listening = await new Promise<boolean>((resolve) => {
        fresh.once('listening', () => resolve(true));
        fresh.once('exit', () => resolve(false));
      });
      if (!listening) {
        process.stderr.write('a new worker exited before it listened; the remaining old workers keep serving\n');
        return;
      }
      if (stopping) return;
      retiring.add(old);
      const exited = new Promise<void>((resolve) => old.once('exit', () => resolve()));
      old.send(RETIRE_MESSAGE);
      await exited;
    }
  };
  process.once('SIGTERM', () => stop('SIGTERM'));
  process.once('SIGINT', () => stop('SIGINT'));
  process.on('SIGHUP', () => {
    if (stopping || replacing) return;
    replacing = true;
    process.stderr.write(`SIGHUP: replacing ${workers.size} workers one at a time\n`);
    void replaceAll().finally(() => (replacing = false));
  });
  for (let i = 0; i < config.workers; i++) fork();
  if (config.metrics) {
    const { AggregatorRegistry } = await import('prom-client');
    const workersMetrics = new AggregatorRegistry();
    await listenMetrics(config, () => workersMetrics.clusterMetrics());
  }
}
