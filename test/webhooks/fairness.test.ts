import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvent } from '../../src/storage/repos/events.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { addMember, quickUser } from '../helpers/members.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

// A slow endpoint holds a few of the deliverer's slots, never another endpoint's deliveries (docs/webhooks.md, "Delivery").

describe('a slow endpoint does not hold up the others', () => {
  let t: TestApp;
  let slow: Receiver;
  let fast: Receiver;
  beforeAll(async () => {
    t = await buildTestApp();
    [slow, fast] = [await startReceiver(), await startReceiver()];
    slow.respond = () => ({ status: 204, delayMs: 3000 });
  });
  afterAll(async () => {
    await t?.close();
    await slow?.close();
    await fast?.close();
  });

  async function appWithEndpoint(receiver: Receiver) {
    const developer = await createDeveloperViaApi(t);
    const app = (await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody() })).json();
    const endpoint = await t.app.inject({ method: 'POST', url: `/v1/dev/apps/${app.id}/webhooks`, headers: bearer(developer.apiKey), payload: { url: receiver.url } });
    receiver.secrets = [endpoint.json().secret];
    const user = await quickUser(t);
    await addMember(t, { id: app.id } as never, user);
    return { appId: app.id as string, userId: user.id };
  }

  it('delivers to a quick endpoint while 30 messages wait on a slow one', async () => {
    const s = await appWithEndpoint(slow);
    const f = await appWithEndpoint(fast);
    await t.db.transaction().execute(async (trx) => {
      for (let i = 0; i < 30; i++) await appendEvent(trx, t.clock.now(), { type: 'app.user_blocked', appId: s.appId, userId: s.userId });
      await appendEvent(trx, t.clock.now(), { type: 'app.user_blocked', appId: f.appId, userId: f.userId });
    });
    const started = Date.now();
    const draining = t.app.webhookDeliverer.drain();
    await fast.waitFor(1, 5000);
    expect(Date.now() - started).toBeLessThan(2500);
    expect(fast.received[0]!.verified?.data.app_id).toBe(f.appId);
    await draining;
    await slow.waitFor(30, 30_000);
    expect(new Set(slow.received.map((r) => r.id)).size).toBe(30);
  }, 60_000);
});
