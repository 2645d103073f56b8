import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvent } from '../../src/storage/repos/events.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { addMember, quickUser } from '../helpers/members.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

// Two processes' deliverers on one PostgreSQL database (docs/webhooks.md, "Delivery"): each message is
// claimed by one of them at a time, so a slow endpoint never sees one webhook-id twice in flight.

const EVENTS = 1000;

describe('two deliverers on one PostgreSQL database', () => {
  let one: TestApp;
  let two: TestApp;
  let receiver: Receiver;

  beforeAll(async () => {
    one = await buildTestApp();
    two = await buildTestApp({ storage: one.storage });
    receiver = await startReceiver();
    receiver.respond = () => ({ status: 200, delayMs: 40 });
  });
  afterAll(async () => {
    await two?.close();
    await one?.close();
    await receiver?.close();
  });

  it(`delivers ${EVENTS} events to a slow endpoint once each, never one id twice at once`, async () => {
    const developer = await createDeveloperViaApi(one);
    const app = (await one.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody() })).json();
    const endpoint = await one.app.inject({ method: 'POST', url: `/v1/dev/apps/${app.id}/webhooks`, headers: bearer(developer.apiKey), payload: { url: receiver.url } });
    expect(endpoint.statusCode, endpoint.body).toBe(201);
    receiver.secrets = [endpoint.json().secret];
    const user = await quickUser(one);
    await addMember(one, { id: app.id } as never, user);
    for (let batch = 0; batch < EVENTS / 100; batch++) {
      await one.db.transaction().execute(async (trx) => {
        for (let i = 0; i < 100; i++) await appendEvent(trx, one.clock.now(), { type: i % 2 ? 'app.user_blocked' : 'app.user_unblocked', appId: app.id, userId: user.id });
      });
    }
    // Both background deliverers poll; both are also pushed to work at once.
    await Promise.all([one.app.webhookDeliverer.drain(), two.app.webhookDeliverer.drain(), one.app.webhookDeliverer.drain(), two.app.webhookDeliverer.drain()]);
    await receiver.waitFor(EVENTS, 60_000);
    await new Promise((resolve) => setTimeout(resolve, 500));
    const ids = receiver.received.map((r) => r.id);
    expect(new Set(ids).size).toBe(EVENTS);
    expect(receiver.maxSameIdInFlight).toBe(1);
    // At least once: an id arrives again only when an attempt failed on our side (e.g. its 10 s ran out
    // on a loaded machine after the receiver had it), and then its row counts more than one attempt.
    const retried = new Set((await one.db.selectFrom('webhook_deliveries').select('id').where('attempts', '>', 1).execute()).map((row) => row.id));
    const repeated = ids.filter((id, index) => ids.indexOf(id) !== index);
    for (const id of repeated) expect(retried.has(id), id).toBe(true);
    expect(ids.length - repeated.length).toBe(EVENTS);
    expect(receiver.received.every((r) => r.verified !== undefined)).toBe(true);
    const pending = await one.db.selectFrom('webhook_deliveries').select('id').where('status', '!=', 'delivered').execute();
    expect(pending).toEqual([]);
  }, 120_000);
});
