import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { freshDatabaseUrl, startServer } from '../helpers/processes.js';

// SIGTERM (docs/operations/deploy.md "Restarts without dropped requests"): /readyz answers 503 at once
// so a proxy takes the process out; requests are still served for SHUTDOWN_DRAIN_SECONDS, each answer
// with `Connection: close`; then the process stops accepting, finishes what it holds (a request whose
// body is still arriving included) and exits 0 — never Fastify's own 503 body.

const DRAIN_SECONDS = 1.5;

/** A raw HTTP/1.1 exchange on one connection: `send` writes, `answer` resolves with everything read until the server closes. */
function rawConnection(port: number) {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.setEncoding('utf8');
  socket.on('data', (chunk) => (received += chunk));
  const closed = new Promise<string>((resolve) => socket.on('close', () => resolve(received)));
  socket.on('error', () => undefined);
  const connected = new Promise<void>((resolve) => socket.once('connect', () => resolve()));
  return { connected, send: (text: string) => socket.write(text), answer: () => closed };
}

describe('SIGTERM drains before it exits', () => {
  let server: Awaited<ReturnType<typeof startServer>> | undefined;
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>> | undefined;
  afterAll(async () => {
    if (server && server.child.exitCode === null) server.child.kill('SIGKILL');
    await server?.done;
    await database?.drop();
  });

  it('readiness off at once, requests served through the drain, the held request answered, exit 0', { timeout: 90_000 }, async () => {
    database = await freshDatabaseUrl();
    server = await startServer(database, { SHUTDOWN_DRAIN_SECONDS: String(DRAIN_SECONDS), LOG_LEVEL: 'error' });
    const base = `http://127.0.0.1:${server.port}`;

    // A request whose body is still arriving when the drain ends.
    const body = JSON.stringify({ email: 'nobody@example.com', password: 'not the password at all', client_id: 'app_unknown' });
    const held = rawConnection(server.port);
    await held.connected;
    held.send(`POST /v1/auth/login HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body.slice(0, 10)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));

    const signalled = performance.now();
    server.child.kill('SIGTERM');
    const exited = server.done.then((finished) => ({ ...finished, ms: performance.now() - signalled }));
    await new Promise((resolve) => setTimeout(resolve, 150));

    const ready = await fetch(`${base}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toEqual({ status: 'unavailable', database: 'ok', shutting_down: true });

    // Still served during the drain, on a new connection, with Connection: close.
    const during = await fetch(`${base}/.well-known/openid-configuration`);
    expect(during.status).toBe(200);
    expect(during.headers.get('connection')).toBe('close');
    await during.arrayBuffer();

    // Past the drain: new connections are refused, the held request is still answered in full.
    await new Promise((resolve) => setTimeout(resolve, DRAIN_SECONDS * 1000 + 300));
    held.send(body.slice(10));
    const answer = await held.answer();
    expect(answer).toMatch(/^HTTP\/1\.1 (400|401|404) /);
    expect(answer.toLowerCase()).toContain('connection: close');
    expect(answer).not.toContain('Service Unavailable');
    expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toHaveProperty('code');

    const finished = await exited;
    expect({ code: finished.code, signal: finished.signal }).toEqual({ code: 0, signal: null });
    expect(finished.ms).toBeGreaterThan(DRAIN_SECONDS * 1000);
    expect(finished.ms).toBeLessThan(DRAIN_SECONDS * 1000 + 3000);
  });
});
