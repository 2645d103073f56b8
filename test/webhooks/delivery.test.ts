import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { appendEvent } from '../../src/storage/repos/events.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { adminHeaders, appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeUser } from '../helpers/factories.js';
import { expectNoSecretsInLogs } from '../helpers/log-secrets.js';
import { addMember, quickUser } from '../helpers/members.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';

// Webhooks per app, end to end (docs/webhooks.md): a receiver on loopback verifies every delivery with
// the `standardwebhooks` package unchanged.

interface DevApp {
  id: string;
  key: string;
}

describe('webhooks per app', () => {
  let t: TestApp;
  let a: DevApp;
  let b: DevApp;
  let ra: Receiver;
  let rb: Receiver;
  let endpointA: string;
  let endpointB: string;
  const secrets: string[] = [];

  const dev = (app: DevApp, method: 'GET' | 'POST' | 'PATCH' | 'DELETE', path: string, payload?: unknown) =>
    t.app.inject({ method, url: `/v1/dev/apps/${app.id}${path}`, headers: bearer(app.key), ...(payload === undefined ? {} : { payload: payload as object }) });
  const drain = () => t.app.webhookDeliverer.drain();
  const block = async (app: DevApp, userId: string, status: 'blocked' | 'active') => {
    const res = await dev(app, 'PATCH', `/users/${userId}`, { status });
    expect(res.statusCode, res.body).toBe(200);
  };
  const deliveries = async (app: DevApp, endpoint: string, query = '') => (await dev(app, 'GET', `/webhooks/${endpoint}/deliveries${query}`)).json().items as Array<Record<string, unknown>>;

  async function makeDevApp(): Promise<DevApp> {
    const developer = await createDeveloperViaApi(t);
    const res = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody() });
    expect(res.statusCode, res.body).toBe(201);
    return { id: res.json().id, key: developer.apiKey };
  }

  beforeAll(async () => {
    t = await buildTestApp();
    [a, b] = [await makeDevApp(), await makeDevApp()];
    [ra, rb] = [await startReceiver(), await startReceiver()];
    const created = await dev(a, 'POST', '/webhooks', { url: ra.url, description: 'main' });
    expect(created.statusCode, created.body).toBe(201);
    endpointA = created.json().id;
    ra.secrets = [created.json().secret];
    secrets.push(created.json().secret);
    const createdB = await dev(b, 'POST', '/webhooks', { url: rb.url });
    endpointB = createdB.json().id;
    rb.secrets = [createdB.json().secret];
    secrets.push(createdB.json().secret);
  });
  afterAll(async () => {
    await ra?.close();
    await rb?.close();
    await t?.close();
  });

  it('shows a Standard Webhooks secret once, and never again', async () => {
    expect(ra.secrets[0]).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(ra.secrets[0]!.slice(6), 'base64')).toHaveLength(32);
    const read = await dev(a, 'GET', `/webhooks/${endpointA}`);
    expect(read.statusCode).toBe(200);
    expect(read.json()).not.toHaveProperty('secret');
    expect(read.json()).toMatchObject({ url: ra.url, enabled: true, event_types: [], disabled_reason: null, description: 'main' });
    const list = await dev(a, 'GET', '/webhooks');
    expect(list.json().items).toHaveLength(1);
    expect(list.body).not.toContain('whsec_');
  });

  it('is authorised like every /v1/dev/apps/{id} route: another developer gets 404, no key 401', async () => {
    expect((await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${a.id}/webhooks`, headers: bearer(b.key) })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${a.id}/webhooks/${endpointA}`, headers: bearer(b.key) })).statusCode).toBe(404);
    expect((await dev(b, 'GET', `/webhooks/${endpointA}`)).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${a.id}/webhooks` })).statusCode).toBe(401);
  });

  it('delivers a change, signed and verifiable, with the Standard Webhooks headers and body', async () => {
    const user = await quickUser(t);
    await addMember(t, { id: a.id } as never, user);
    const before = ra.received.length;
    await block(a, user.id, 'blocked');
    await drain();
    await ra.waitFor(before + 1);
    const got = ra.received[before]!;
    expect(got.verified).toBeDefined();
    expect(got.headers['webhook-id']).toMatch(/^msg_/);
    expect(got.headers['webhook-timestamp']).toMatch(/^\d+$/);
    expect(got.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(got.verified).toMatchObject({ type: 'user.blocked', data: { app_id: a.id, user_id: user.id } });
    expect(Object.keys(got.verified!)).toEqual(['type', 'timestamp', 'data']);
    expect(got.body).not.toMatch(/127\.0\.0\.1|developer_id|user_agent/);
    const log = await deliveries(a, endpointA);
    expect(log[0]).toMatchObject({ id: got.id, type: 'user.blocked', status: 'delivered', attempts: 1, last_status_code: 204 });
  });

  it('sends an app only events about its own users: never another app\'s user, sign-in or block', async () => {
    const onlyA = await quickUser(t);
    const both = await makeUser(t.app, { email: `both-${Date.now()}@example.com` });
    await addMember(t, { id: a.id } as never, onlyA);
    await addMember(t, { id: a.id } as never, both);
    await addMember(t, { id: b.id } as never, both);
    const [beforeA, beforeB] = [ra.received.length, rb.received.length];
    await block(a, onlyA.id, 'blocked');
    await block(a, both.id, 'blocked');
    // A sign-in at B (with the consent it implies) is B's business alone.
    const login = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: both.email, password: both.password, client_id: b.id } });
    expect(login.statusCode, login.body).toBe(200);
    // Disabling the account concerns every app the user belongs to.
    const disabled = await t.app.inject({ method: 'PATCH', url: `/v1/admin/users/${both.id}`, headers: adminHeaders, payload: { status: 'disabled' } });
    expect(disabled.statusCode, disabled.body).toBe(200);
    await drain();
    await ra.waitFor(beforeA + 3);
    await rb.waitFor(beforeB + 3);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const toA = ra.received.slice(beforeA).map((r) => [r.verified?.type, r.verified?.data.user_id]);
    const toB = rb.received.slice(beforeB).map((r) => [r.verified?.type, r.verified?.data.user_id]);
    expect(toA.sort()).toEqual([['user.blocked', both.id], ['user.blocked', onlyA.id], ['user.disabled', both.id]].sort());
    expect(toB.sort()).toEqual([['consent.granted', both.id], ['user.disabled', both.id], ['user.signed_in', both.id]].sort());
    for (const r of rb.received) expect(r.verified?.data.app_id).toBe(b.id);
    for (const r of rb.received) expect(r.verifiedBy).toEqual([0]);
  });

  it('tells the app when the user signs out of it (user.signed_out)', async () => {
    const user = await makeUser(t.app, { email: `out-${Date.now()}@example.com` });
    const before = ra.received.length;
    const login = await t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: user.email, password: user.password, client_id: a.id } });
    expect(login.statusCode, login.body).toBe(200);
    const logout = await t.app.inject({ method: 'POST', url: '/v1/auth/logout', payload: { refresh_token: login.json().refresh_token } });
    expect(logout.statusCode).toBe(204);
    await drain();
    await ra.waitFor(before + 1);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const signedOut = ra.received.filter((r) => r.verified?.type === 'user.signed_out' && r.verified.data.user_id === user.id);
    expect(signedOut).toHaveLength(1);
    expect(signedOut[0]!.verified!.data).toEqual({ app_id: a.id, user_id: user.id });
  });

  it('tells the app a registration there created a user who accepted the platform terms (user.created, legal.accepted)', async () => {
    const terms = await t.app.inject({ method: 'PUT', url: '/v1/admin/legal/terms?lang=en', headers: adminHeaders, payload: { title: 'Terms', content: '# Terms' } });
    expect(terms.statusCode, terms.body).toBe(201);
    const before = ra.received.length;
    const email = `reg-${Date.now()}@example.com`;
    const registered = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password: 'correct horse battery staple 42', client_id: a.id, accept_terms: true } });
    expect(registered.statusCode, registered.body).toBeLessThan(300);
    await drain();
    await ra.waitFor(before + 2);
    await new Promise((resolve) => setTimeout(resolve, 100));
    const types = ra.received.slice(before).map((r) => r.verified?.type);
    expect(types).toContain('user.created');
    const accepted = ra.received.slice(before).find((r) => r.verified?.type === 'legal.accepted')!;
    expect(accepted.verified!.data).toMatchObject({ app_id: a.id, document: 'terms', version: 1, lang: 'en', owner: 'platform' });
    expect(accepted.body).not.toContain(email);
  });

  it('writes deliveries in the change\'s transaction: a change that rolls back sends nothing', async () => {
    const user = await quickUser(t);
    await addMember(t, { id: a.id } as never, user);
    const before = (await deliveries(a, endpointA, '?limit=100')).length;
    await expect(
      t.db.transaction().execute(async (trx) => {
        await appendEvent(trx, t.clock.now(), { type: 'app.user_blocked', appId: a.id, userId: user.id });
        throw new Error('rolled back');
      }),
    ).rejects.toThrow('rolled back');
    expect((await deliveries(a, endpointA, '?limit=100')).length).toBe(before);
  });

  it('filters by event type', async () => {
    const patched = await dev(b, 'PATCH', `/webhooks/${endpointB}`, { event_types: ['user.deleted'] });
    expect(patched.statusCode, patched.body).toBe(200);
    expect(patched.json().event_types).toEqual(['user.deleted']);
    const user = await quickUser(t);
    await addMember(t, { id: b.id } as never, user);
    const before = rb.received.length;
    await block(b, user.id, 'blocked');
    await drain();
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(rb.received.length).toBe(before);
    await dev(b, 'PATCH', `/webhooks/${endpointB}`, { event_types: [] });
  });

  it('rotates the secret with an overlap in which both secrets sign, then only the new one', async () => {
    const rotated = await dev(a, 'POST', `/webhooks/${endpointA}/secret`, {});
    expect(rotated.statusCode, rotated.body).toBe(200);
    const next = rotated.json().secret as string;
    secrets.push(next);
    expect(next).not.toBe(ra.secrets[0]);
    expect(rotated.json().previous_secret_expires_at).not.toBeNull();
    ra.secrets = [ra.secrets[0]!, next];
    const user = await quickUser(t);
    await addMember(t, { id: a.id } as never, user);
    let before = ra.received.length;
    await block(a, user.id, 'blocked');
    await drain();
    await ra.waitFor(before + 1);
    const during = ra.received[before]!;
    expect(String(during.headers['webhook-signature']).split(' ')).toHaveLength(2);
    expect(during.verifiedBy).toEqual([0, 1]);

    t.clock.advance(24 * 3600 + 1);
    before = ra.received.length;
    await block(a, user.id, 'active');
    await drain();
    await ra.waitFor(before + 1);
    const after = ra.received[before]!;
    expect(String(after.headers['webhook-signature']).split(' ')).toHaveLength(1);
    expect(after.verifiedBy).toEqual([1]);
    ra.secrets = [next];
  });

  it('sends a test event and redelivers a message with the same webhook-id', async () => {
    const before = ra.received.length;
    const test = await dev(a, 'POST', `/webhooks/${endpointA}/test`);
    expect(test.statusCode, test.body).toBe(202);
    await drain();
    await ra.waitFor(before + 1);
    expect(ra.received[before]!.verified).toMatchObject({ type: 'webhook.test', data: { app_id: a.id, test: true } });
    const again = await dev(a, 'POST', `/webhooks/${endpointA}/deliveries/${test.json().id}/redeliver`);
    expect(again.statusCode, again.body).toBe(202);
    expect(again.json().status).toBe('pending');
    await drain();
    await ra.waitFor(before + 2);
    expect(ra.received[before + 1]!.id).toBe(test.json().id);
    expect((await dev(a, 'POST', `/webhooks/${endpointA}/deliveries/msg_00000000000000000000000000/redeliver`)).statusCode).toBe(404);
  });

  it('retries a failing endpoint with backoff on the injected clock for 24 h, then marks the message failed; after 3 days of failures it disables the endpoint', async () => {
    ra.respond = () => ({ status: 500, body: 'receiver is down: ' + 'x'.repeat(5000) });
    const user = await quickUser(t);
    await addMember(t, { id: a.id } as never, user);
    const before = ra.received.length;
    await block(a, user.id, 'blocked');
    await drain();
    await ra.waitFor(before + 1);
    const [first] = await deliveries(a, endpointA, '?limit=1');
    expect(first).toMatchObject({ status: 'pending', attempts: 1, last_status_code: 500 });
    expect(String(first!.last_response)).toMatch(/^receiver is down: x+$/);
    expect(String(first!.last_response).length).toBeLessThanOrEqual(300);
    expect((await dev(a, 'GET', `/webhooks/${endpointA}`)).json().failing_since).not.toBeNull();

    // Backoff: the next attempt is not due at once.
    await drain();
    expect(ra.received.length).toBe(before + 1);
    const gaps: number[] = [];
    let previous = Date.parse(String(first!.last_attempt_at));
    for (let hours = 0; hours < 30; ) {
      const [row] = await deliveries(a, endpointA, '?limit=1');
      if (row!.status !== 'pending') break;
      const due = Date.parse(String(row!.next_attempt_at));
      gaps.push((due - previous) / 1000);
      const step = Math.ceil((due - Date.parse(new Date(t.clock.now() * 1000).toISOString())) / 1000) + 1;
      t.clock.advance(Math.max(step, 1));
      hours += Math.max(step, 1) / 3600;
      previous = due;
      await drain();
    }
    const [settled] = await deliveries(a, endpointA, '?limit=1');
    expect(settled).toMatchObject({ id: first!.id, status: 'failed', last_status_code: 500 });
    expect(Number(settled!.attempts)).toBeGreaterThan(15);
    expect(Date.parse(String(settled!.last_attempt_at)) - Date.parse(String(settled!.created_at))).toBeGreaterThanOrEqual(24 * 3600 * 1000);
    // Exponential: each early gap about twice the one before (jitter ±20 %), capped at an hour.
    expect(gaps[1]! / gaps[0]!).toBeGreaterThan(1.2);
    expect(Math.max(...gaps)).toBeLessThanOrEqual(3600 * 1.2 + 1);
    // Every attempt carried the same webhook-id.
    expect(new Set(ra.received.slice(before).map((r) => r.id))).toEqual(new Set([first!.id]));
    expect((await dev(a, 'GET', `/webhooks/${endpointA}`)).json().enabled).toBe(true);

    // Still failing on the third day: the endpoint is disabled, and the developer is told why.
    t.clock.advance(2 * 24 * 3600);
    await block(a, user.id, 'active');
    await drain();
    const endpoint = (await dev(a, 'GET', `/webhooks/${endpointA}`)).json();
    expect(endpoint).toMatchObject({ enabled: false, disabled_reason: 'failing' });
    expect(endpoint.disabled_at).not.toBeNull();
    // Nothing is queued for a disabled endpoint, and redelivering to it is refused until it is enabled.
    const queued = (await deliveries(a, endpointA, '?status=pending')).length;
    await block(a, user.id, 'blocked');
    expect((await deliveries(a, endpointA, '?status=pending')).length).toBe(queued);
    expect((await dev(a, 'POST', `/webhooks/${endpointA}/deliveries/${first!.id}/redeliver`)).statusCode).toBe(409);
    const enabled = await dev(a, 'PATCH', `/webhooks/${endpointA}`, { enabled: true });
    expect(enabled.json()).toMatchObject({ enabled: true, disabled_reason: null, failing_since: null });
    ra.respond = () => ({ status: 204 });
    const redo = await dev(a, 'POST', `/webhooks/${endpointA}/deliveries/${first!.id}/redeliver`);
    expect(redo.statusCode).toBe(202);
    const count = ra.received.length;
    await drain();
    await ra.waitFor(count + 1);
    expect(ra.received[count]!.id).toBe(first!.id);
  });

  it('refuses bad endpoint input with invalid_request', async () => {
    expect((await dev(a, 'POST', '/webhooks', { url: 'ftp://example.com/x' })).json()).toMatchObject({ code: 'invalid_request' });
    expect((await dev(a, 'POST', '/webhooks', { url: 'https://user:pw@example.com/x' })).statusCode).toBe(400);
    expect((await dev(a, 'POST', '/webhooks', { url: 'https://example.com/x', event_types: ['no.such'] })).statusCode).toBe(400);
    expect((await dev(a, 'GET', `/webhooks/${endpointA}/deliveries?limit=0`)).statusCode).toBe(400);
  });

  it('deletes an endpoint with its log; deleting the app deletes its endpoints', async () => {
    const extra = await dev(b, 'POST', '/webhooks', { url: rb.url });
    secrets.push(extra.json().secret);
    expect((await dev(b, 'DELETE', `/webhooks/${extra.json().id}`)).statusCode).toBe(204);
    expect((await dev(b, 'GET', `/webhooks/${extra.json().id}`)).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/dev/apps/${b.id}`, headers: bearer(b.key) })).statusCode).toBe(204);
    const left = await t.db.selectFrom('webhook_endpoints').select('id').where('app_id', '=', b.id).execute();
    expect(left).toEqual([]);
  });

  it('never writes a signing secret to the log', () => {
    expectNoSecretsInLogs(t.logs, secrets.flatMap((s) => [s, s.slice(6)]));
  });
});
