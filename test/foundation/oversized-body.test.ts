import http from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';

// A body over the limit (64 KiB) is answered 413 in the catalogue's shape, never with a reset: the
// server reads and discards the rest of the body (up to a bound) before the connection can close, so a
// client still writing sees its answer rather than EPIPE/ECONNRESET (issue 62, docs/reference/errors.md).

const PIECE = Buffer.alloc(64 * 1024, 'a');

interface Outcome {
  status?: number;
  code?: string;
  error?: string;
}

/** One POST whose body is written in 64 KiB pieces `gapMs` apart; with `declared`, its length is sent up front. */
function slowPost(port: number, agent: http.Agent, pieces: number, gapMs: number, declared: boolean): Promise<Outcome> {
  return new Promise((resolve) => {
    const outcome: Outcome = {};
    let answered = false;
    let written = false;
    let settled = false;
    const settle = () => {
      if (settled || !(outcome.error || (answered && written))) return;
      settled = true;
      clearTimeout(deadline);
      resolve(outcome);
    };
    const fail = (error: NodeJS.ErrnoException | null | undefined) => {
      if (!error) return;
      outcome.error ??= error.code ?? error.message;
      settle();
    };
    const deadline = setTimeout(() => fail(new Error('no outcome within 10 s')), 10_000);
    const req = http.request({
      host: '127.0.0.1',
      port,
      agent,
      method: 'POST',
      path: '/v1/auth/login',
      headers: { 'content-type': 'application/json', ...(declared ? { 'content-length': String(pieces * PIECE.length) } : {}) },
    });
    req.on('error', fail);
    req.on('response', (res) => {
      let text = '';
      res.setEncoding('utf8');
      res.on('data', (chunk) => (text += chunk));
      res.on('error', fail);
      res.on('end', () => {
        outcome.status = res.statusCode;
        try {
          outcome.code = JSON.parse(text).code;
        } catch {
          // not JSON: recorded without a code
        }
        answered = true;
        settle();
      });
    });
    let sent = 0;
    const writeNext = (error?: Error | null) => {
      if (error) return fail(error);
      if (settled || outcome.error) return;
      if (sent === pieces) {
        req.end(() => {
          written = true;
          settle();
        });
        return;
      }
      sent += 1;
      req.write(PIECE, (writeError) => (writeError ? fail(writeError) : setTimeout(writeNext, gapMs)));
    };
    writeNext();
  });
}

describe('oversized bodies are answered, not reset', () => {
  let t: TestApp;
  let port: number;
  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '1000000' } });
    await t.app.listen({ port: 0, host: '127.0.0.1' });
    port = (t.app.server.address() as { port: number }).port;
  });
  afterAll(async () => t?.close());

  it('100 slow oversized uploads (64 KiB pieces, 2 ms apart): 100 answers 413 payload_too_large, 0 resets', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 10 });
    const outcomes = await Promise.all(Array.from({ length: 100 }, (_, i) => slowPost(port, agent, 4 + (i % 5), 2, i % 2 === 0)));
    agent.destroy();
    const tally = outcomes.reduce<Record<string, number>>((n, o) => {
      const key = o.error ? `error ${o.error}` : `${o.status} ${o.code}`;
      n[key] = (n[key] ?? 0) + 1;
      return n;
    }, {});
    expect(tally).toEqual({ '413 payload_too_large': 100 });
  });

  it('the connection is still usable after the answer when the client finished sending', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    const first = await slowPost(port, agent, 3, 1, false);
    const second = await slowPost(port, agent, 3, 1, true);
    agent.destroy();
    expect([first, second]).toEqual([
      { status: 413, code: 'payload_too_large' },
      { status: 413, code: 'payload_too_large' },
    ]);
  });

  it('a client that keeps sending past the discard bound (8 MiB) is cut off', async () => {
    const agent = new http.Agent({ keepAlive: false });
    const pieces = 512; // 32 MiB declared and attempted
    const outcome = await slowPost(port, agent, pieces, 0, true);
    agent.destroy();
    expect(outcome.error).toMatch(/EPIPE|ECONNRESET|ERR_STREAM_DESTROYED/);
  });
});
