import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hashPassword } from '../../src/auth/passwords.js';
import { appendEvent } from '../../src/storage/repos/events.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { addMember, quickUser } from '../helpers/members.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

/**
 * The account purge and webhooks together (docs/account/deletion.md, docs/webhooks.md): every app the
 * person belonged to receives `user.deleted` once, verified with `standardwebhooks`; nothing else about
 * the person is left to deliver (pending payloads may hold their addresses); an app they never belonged
 * to hears nothing.
 */

const PASSWORD = 'a perfectly fine passphrase 7';
const DAY = 86400;

describe('deleting an account tells each of its apps once', () => {
  let t: TestApp;
  const apps: Array<{ id: string; receiver: Receiver }> = [];

  beforeAll(async () => {
    t = await buildTestApp({ env: { IP_AUTH_PER_MINUTE: '100000', MAIL_INTERVAL_SECONDS: '0' } });
    for (let i = 0; i < 3; i++) {
      const developer = await createDeveloperViaApi(t);
      const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody() });
      const receiver = await startReceiver();
      const endpoint = await t.app.inject({ method: 'POST', url: `/v1/dev/apps/${created.json().id}/webhooks`, headers: bearer(developer.apiKey), payload: { url: receiver.url } });
      expect(endpoint.statusCode, endpoint.body).toBe(201);
      receiver.secrets = [endpoint.json().secret];
      apps.push({ id: created.json().id, receiver });
    }
  });
  afterAll(async () => {
    for (const app of apps) await app.receiver.close();
    await t?.close();
  });

  it('user.deleted reaches the two apps of the person once each, and the third app nothing', async () => {
    const user = await quickUser(t, { email: uniqueEmail('gone'), email_verified: 1, password_hash: await hashPassword(PASSWORD) });
    const [first, second, stranger] = apps as [(typeof apps)[0], (typeof apps)[0], (typeof apps)[0]];
    for (const app of [first, second]) await addMember(t, { id: app.id } as never, user);
    const client = await t.db.selectFrom('apps').selectAll().where('id', '=', first.id).executeTakeFirstOrThrow();
    const { response } = await t.app.tokens.issueTokens(t.db, { app: client as never, user, scope: 'openid', authTime: t.clock.now(), amr: ['pwd'] as never });

    // A change whose webhook is still pending when the account goes: its payload names the address.
    await appendEvent(t.db, t.clock.now(), { type: 'user.email_changed', userId: user.id, data: { old_email: user.email, new_email: `new.${user.email}` } });
    const scheduled = await t.app.inject({ method: 'DELETE', url: '/v1/auth/account', headers: { authorization: `Bearer ${response.access_token}` }, payload: { password: PASSWORD } });
    expect(scheduled.statusCode, scheduled.body).toBe(202);

    t.clock.advance(8 * DAY);
    await t.app.purge.runOnce();
    const left = await t.db.selectFrom('webhook_deliveries').select(['app_id', 'payload']).where('user_id', '=', user.id).execute();
    expect(left.map((row) => JSON.parse(row.payload).type).sort()).toEqual(['user.deleted', 'user.deleted']);
    expect(left.some((row) => row.payload.includes(user.email))).toBe(false);

    await t.app.webhookDeliverer.drain();
    for (const app of [first, second]) {
      const deleted = app.receiver.received.filter((r) => r.verified?.type === 'user.deleted');
      expect(deleted.map((r) => r.verified!.data)).toEqual([{ app_id: app.id, user_id: user.id }]);
      expect(app.receiver.received.every((r) => r.verified !== undefined)).toBe(true);
    }
    expect(stranger.receiver.received.filter((r) => r.body.includes(user.id))).toEqual([]);
  });
});
