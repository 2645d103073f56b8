import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DIALECT } from '../helpers/app.js';
import { freePort, freshDatabaseUrl } from '../helpers/processes.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { call, isAlive, launch, provision, type Server } from './harness.js';

// kill -9 between a change and its webhook (docs/webhooks.md, "Delivery"): the delivery row was
// committed with the change, so after a restart on the same database the webhook still arrives.
describe(`webhooks survive kill -9 (${TEST_DIALECT})`, () => {
  let database: Awaited<ReturnType<typeof freshDatabaseUrl>>;
  const servers: Server[] = [];
  let receiver: Receiver | undefined;

  afterAll(async () => {
    for (const server of servers) if (isAlive(server)) server.child.kill('SIGKILL');
    await Promise.all(servers.map((s) => s.done));
    await receiver?.close();
    await database?.drop();
  });

  it('delivers the webhooks of changes acknowledged before the kill, once per id', async () => {
    database = await freshDatabaseUrl();
    const first = await launch(database);
    servers.push(first);
    const { clientId, developerKey } = await provision(first.url);
    // The receiver is not listening yet: every attempt before the kill fails, so nothing is delivered before it.
    const port = await freePort();
    const endpoint = await call(`${first.url}/v1/dev/apps/${clientId}/webhooks`, { method: 'POST', headers: { authorization: `Bearer ${developerKey}` }, json: { url: `http://127.0.0.1:${port}/hooks`, event_types: ['user.created'] } });
    expect(endpoint.status).toBe(201);
    const emails: string[] = [];
    for (let i = 0; i < 5; i++) {
      const email = `kill-${randomBytes(4).toString('hex')}@example.com`;
      const res = await call(`${first.url}/v1/auth/register`, { method: 'POST', json: { email, password: 'correct horse battery staple 42', client_id: clientId } });
      expect(res.status).toBeLessThan(300);
      emails.push(email);
    }
    first.child.kill('SIGKILL');
    await first.done;

    receiver = await startReceiver('/hooks', port);
    receiver.secrets = [endpoint.body.secret];
    const second = await launch(database);
    servers.push(second);
    // The retry after the failed first attempt is due within seconds of it.
    await receiver.waitFor(5, 60_000);
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const ids = receiver.received.map((r) => r.id);
    expect(new Set(ids).size).toBe(5);
    expect(ids).toHaveLength(5);
    expect(receiver.received.every((r) => r.verified?.type === 'user.created' && r.verified.data.app_id === clientId)).toBe(true);
  });
});
