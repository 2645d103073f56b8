import { request } from 'node:http';
import { readFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { freePort, freshDatabaseUrl, nodeChildrenOf, startServer } from '../helpers/processes.js';

/**
 * A scrape of real server processes (`tsx src/server.ts`): the metrics are served on METRICS_PORT only
 * (on 127.0.0.1 unless METRICS_HOST says otherwise), never on the API's port, and not at all without
 * METRICS=1; with WORKERS=2 the primary's scrape counts every worker's requests and shows each worker's
 * process metrics.
 */

type Server = Awaited<ReturnType<typeof startServer>>;

/** One GET over a connection of its own (no keep-alive): the cluster hands each new connection to the next worker. */
const getOnce = (url: string) =>
  new Promise<number>((resolve, reject) => {
    request(url, { agent: false }, (res) => {
      res.resume();
      res.on('end', () => resolve(res.statusCode!));
    })
      .on('error', reject)
      .end();
  });

/** Whether anything accepts a TCP connection at host:port. */
const accepts = (host: string, port: number) =>
  fetch(`http://${host}:${port}/metrics`).then(
    () => true,
    () => false,
  );

/** The local addresses (hex, as /proc/net/tcp and tcp6 write them) of the sockets listening on `port`. */
function listeningAddresses(port: number): string[] {
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  return ['/proc/net/tcp', '/proc/net/tcp6'].flatMap((file) =>
    readFileSync(file, 'utf8')
      .split('\n')
      .slice(1)
      .map((line) => line.trim().split(/\s+/))
      .filter((fields) => fields[1]?.endsWith(`:${hexPort}`) && fields[3] === '0A')
      .map((fields) => fields[1]!.split(':')[0]!),
  );
}

describe('scraping a running server', { timeout: 120_000 }, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  const servers: Server[] = [];
  beforeAll(async () => {
    database = await freshDatabaseUrl();
  });
  afterEach(async () => {
    for (const server of servers.splice(0)) {
      if (server.child.exitCode === null && server.child.signalCode === null) server.child.kill('SIGTERM');
      await server.done;
    }
  });
  afterAll(async () => database?.drop());

  it('METRICS=1: served on METRICS_PORT on 127.0.0.1 only; the API port answers /metrics with 404', async () => {
    const metricsPort = await freePort();
    const server = await startServer(database, { METRICS: '1', METRICS_PORT: String(metricsPort) });
    servers.push(server);
    const scrape = await fetch(`http://127.0.0.1:${metricsPort}/metrics`);
    expect(scrape.status).toBe(200);
    expect(await scrape.text()).toMatch(/^gatehouse_http_requests_total\{method="GET",route="\/readyz",status="2xx"\} \d+$/m);
    const api = await fetch(`http://127.0.0.1:${server.port}/metrics`);
    expect(api.status).toBe(404);
    expect(await api.json()).toMatchObject({ code: 'not_found' });
    // 0100007F: 127.0.0.1, the one address the metrics listen on.
    expect(listeningAddresses(metricsPort)).toEqual(['0100007F']);
    const external = Object.values(networkInterfaces())
      .flat()
      .find((address) => address?.family === 'IPv4' && !address.internal)?.address;
    if (external) expect(await accepts(external, metricsPort)).toBe(false);
  });

  it('METRICS off: nothing listens on METRICS_PORT', async () => {
    const metricsPort = await freePort();
    const server = await startServer(database, { METRICS_PORT: String(metricsPort) });
    servers.push(server);
    expect(await accepts('127.0.0.1', metricsPort)).toBe(false);
    expect((await fetch(`http://127.0.0.1:${server.port}/metrics`)).status).toBe(404);
  });

  it('WORKERS=2: one scrape of the primary counts the requests both workers answered and shows each worker\'s process metrics', async () => {
    const metricsPort = await freePort();
    const cluster = await startServer(database, { WORKERS: '2', METRICS: '1', METRICS_PORT: String(metricsPort), LOG_LEVEL: 'info' });
    servers.push(cluster);
    // Both workers listen (each logs it once): from then on the primary hands connections to them in turn.
    const listening = `"msg":"Server listening at http://127.0.0.1:${cluster.port}"`;
    await expect.poll(() => cluster.output().stdout.split(listening).length - 1, { timeout: 30_000 }).toBe(2);
    const workers = nodeChildrenOf(cluster.child.pid!);
    expect(workers).toHaveLength(2);

    const requests = 20;
    for (let i = 0; i < requests; i++) expect(await getOnce(`http://127.0.0.1:${cluster.port}/healthz`)).toBe(200);

    const body = await (await fetch(`http://127.0.0.1:${metricsPort}/metrics`)).text();
    // Summed over the workers: each one answered half of them.
    expect(body).toMatch(new RegExp(`^gatehouse_http_requests_total\\{method="GET",route="/healthz",status="2xx"\\} ${requests}$`, 'm'));
    expect(body).toMatch(new RegExp(`^gatehouse_http_request_duration_seconds_count\\{route="/healthz"\\} ${requests}$`, 'm'));
    // One database: its outbox depth is shown once, not once per worker.
    expect(body.match(/^gatehouse_outbox_pending /gm)).toHaveLength(1);
    // Each worker's own process metrics, apart.
    for (const series of ['process_cpu_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_p99_seconds', 'nodejs_heap_size_used_bytes']) {
      const pids = [...body.matchAll(new RegExp(`^${series}\\{pid="(\\d+)"\\} [\\d.e+-]+$`, 'gm'))].map((match) => Number(match[1]));
      expect(pids.sort(), series).toEqual([...workers].sort());
    }
  });
});
