import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';

/**
 * A webhook receiver on loopback that verifies every delivery with the `standardwebhooks` package,
 * unchanged, against each of the secrets it is given (docs/webhooks.md, "Verifying a delivery").
 */

export interface Received {
  id: string;
  headers: IncomingHttpHeaders;
  body: string;
  /** The parsed body, when some secret verified it; undefined when none did. */
  verified?: { type: string; timestamp: string; data: Record<string, unknown> };
  /** Which of `secrets` verified it (indexes). */
  verifiedBy: number[];
}

export interface Receiver {
  url: string;
  received: Received[];
  /** Secrets to verify with (set after the endpoint is created). */
  secrets: string[];
  /** What to answer next: status, body, and how long to wait first (ms). */
  respond: (received: Received) => { status: number; body?: string; delayMs?: number; headers?: Record<string, string> };
  /** The most deliveries in flight at once with the same webhook-id (1 when none overlapped). */
  maxSameIdInFlight: number;
  close(): Promise<void>;
  /** Waits until `count` deliveries arrived (or throws after `ms`). */
  waitFor(count: number, ms?: number): Promise<void>;
}

export async function startReceiver(path = '/hooks', port = 0): Promise<Receiver> {
  const inFlight = new Map<string, number>();
  const receiver: Receiver = {
    url: '',
    received: [],
    secrets: [],
    respond: () => ({ status: 204 }),
    maxSameIdInFlight: 0,
    close: async () => undefined,
    waitFor: async () => undefined,
  };
  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', async () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const id = String(req.headers['webhook-id'] ?? '');
      const now = (inFlight.get(id) ?? 0) + 1;
      inFlight.set(id, now);
      receiver.maxSameIdInFlight = Math.max(receiver.maxSameIdInFlight, now);
      const entry: Received = { id, headers: req.headers, body, verifiedBy: [] };
      receiver.secrets.forEach((secret, index) => {
        try {
          const parsed = new Webhook(secret).verify(body, req.headers as Record<string, string>) as Received['verified'];
          entry.verified = parsed;
          entry.verifiedBy.push(index);
        } catch {
          // not signed by this secret
        }
      });
      receiver.received.push(entry);
      const answer = receiver.respond(entry);
      if (answer.delayMs) await new Promise((resolve) => setTimeout(resolve, answer.delayMs));
      inFlight.set(id, (inFlight.get(id) ?? 1) - 1);
      res.writeHead(answer.status, { 'content-type': 'text/plain', ...answer.headers });
      res.end(answer.body ?? '');
    });
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}${path}`;
  receiver.close = () => new Promise<void>((resolve) => server.close(() => resolve()));
  receiver.waitFor = async (count, ms = 10_000) => {
    const until = Date.now() + ms;
    while (receiver.received.length < count) {
      if (Date.now() > until) throw new Error(`expected ${count} deliveries, got ${receiver.received.length}`);
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  };
  return receiver;
}
