import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { FastifyInstance } from 'fastify';
import { buildApp } from '../../src/app.js';
import type { Storage } from '../../src/storage/connect.js';
import net from 'node:net';
import { createTestStorage, testConfig } from '../helpers/app.js';
import { eventually } from '../helpers/concurrency.js';

/** The access log: one line per request, except successful health probes; failed probes are logged. */
describe('access log', () => {
  let app: FastifyInstance;
  let storage: Storage;
  let drop: () => Promise<void>;
  const lines: Array<Record<string, unknown>> = [];
  const accessLines = () => lines.filter((l) => l.msg === 'request completed');

  beforeAll(async () => {
    ({ storage, drop } = await createTestStorage());
    app = await buildApp(testConfig(), { storage, logStream: { write: (line) => void lines.push(JSON.parse(line)) } });
    await app.ready();
  });
  afterAll(async () => {
    await app.close();
    await storage.close();
    await drop();
  });

  it('writes one line per request with method, URL and status', async () => {
    lines.length = 0;
    expect((await app.inject('/.well-known/openid-configuration')).statusCode).toBe(200);
    expect((await app.inject('/v1/nothing-here')).statusCode).toBe(404);
    expect(accessLines().map((l) => [(l.req as { url: string }).url, (l.res as { statusCode: number }).statusCode])).toEqual([
      ['/.well-known/openid-configuration', 200],
      ['/v1/nothing-here', 404],
    ]);
    expect(lines.filter((l) => l.msg === 'request abandoned')).toEqual([]);
  });

  it('writes none for a successful /healthz or /readyz', async () => {
    lines.length = 0;
    expect((await app.inject('/healthz')).statusCode).toBe(200);
    expect((await app.inject('/readyz')).statusCode).toBe(200);
    expect(accessLines()).toEqual([]);
  });

  it('still writes one for a probe that fails (database gone: /readyz 503)', async () => {
    lines.length = 0;
    const { storage: gone, drop: dropGone } = await createTestStorage();
    const probe = await buildApp(testConfig(), { storage: gone, logStream: { write: (line) => void lines.push(JSON.parse(line)) } });
    await probe.ready();
    try {
      await gone.close();
      expect((await probe.inject('/readyz')).statusCode).toBe(503);
      expect(accessLines().map((l) => (l.res as { statusCode: number }).statusCode)).toEqual([503]);
    } finally {
      await probe.close();
      await dropGone();
    }
  });

  it('a route\'s log line and an error line carry their request id, redacted', async () => {
    lines.length = 0;
    const { storage: own, drop: dropOwn } = await createTestStorage();
    const probe = await buildApp(testConfig(), { storage: own, logStream: { write: (line) => void lines.push(JSON.parse(line)) } });
    probe.get('/test-only/logs', async (request, reply) => {
      request.log.warn({ body: { password: 'hunter2-secret' } }, 'a route that logs');
      return reply.code(204).send();
    });
    probe.get('/test-only/boom', async () => {
      throw new Error('boom for the log');
    });
    await probe.ready();
    try {
      const logged = await probe.inject('/test-only/logs');
      const boom = await probe.inject('/test-only/boom');
      expect(boom.statusCode).toBe(500);
      const warn = lines.find((l) => l.msg === 'a route that logs')!;
      expect(warn.reqId).toBe(logged.headers['x-request-id']);
      expect(JSON.stringify(warn)).not.toContain('hunter2-secret');
      expect(logged.statusCode).toBe(204);
      const errored = lines.find((l) => l.level === 50)!;
      expect(errored.reqId).toBe(boom.headers['x-request-id']);
      expect(JSON.stringify(errored)).toContain('boom for the log');
    } finally {
      await probe.close();
      await own.close();
      await dropOwn();
    }
  });

  it('writes one line with 499 for a request whose client left before the answer, and none when it comes', async () => {
    lines.length = 0;
    const { storage: own, drop: dropOwn } = await createTestStorage();
    const probe = await buildApp(testConfig(), { storage: own, logStream: { write: (line) => void lines.push(JSON.parse(line)) } });
    let arrived!: () => void;
    const handlerRuns = new Promise<void>((resolve) => (arrived = resolve));
    let answer!: () => void;
    const answerNow = new Promise<void>((resolve) => (answer = resolve));
    probe.get('/test-only/slow', async () => {
      arrived();
      await answerNow;
      return { late: true };
    });
    await probe.listen({ host: '127.0.0.1', port: 0 });
    const { port } = probe.server.address() as net.AddressInfo;
    try {
      // Answered: one 'request completed', and its connection's close afterwards is no abandonment.
      const answered = await fetch(`http://127.0.0.1:${port}/.well-known/openid-configuration?code=secret-code`, { headers: { connection: 'close' } });
      expect(answered.status).toBe(200);
      await answered.text();

      const socket = net.connect(port, '127.0.0.1', () => socket.write(`GET /test-only/slow?token=secret-token HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n`));
      socket.on('error', () => {});
      await handlerRuns;
      socket.destroy();
      expect(await eventually(async () => lines.some((l) => l.msg === 'request abandoned'))).toBe(true);
      // The answer comes after the client has gone: it is written nowhere and logged no second time.
      // (The next request starts after the handler has resumed and sent it.)
      answer();
      expect((await fetch(`http://127.0.0.1:${port}/v1/after`, { headers: { connection: 'close' } })).status).toBe(404);

      const outcomes = lines.filter((l) => l.msg === 'request completed' || l.msg === 'request abandoned');
      expect(outcomes.map((l) => [l.msg, (l.req as { url: string }).url, (l.res as { statusCode: number }).statusCode])).toEqual([
        ['request completed', '/.well-known/openid-configuration?code=%5Bredacted%5D', 200],
        ['request abandoned', '/test-only/slow?token=%5Bredacted%5D', 499],
        ['request completed', '/v1/after', 404],
      ]);
      expect(outcomes[1]!.reqId).toEqual(expect.any(String));
      expect(outcomes[1]!.responseTime).toEqual(expect.any(Number));
      expect(JSON.stringify(lines)).not.toMatch(/secret-(code|token)/);
    } finally {
      await probe.close();
      await own.close();
      await dropOwn();
    }
  });
});
