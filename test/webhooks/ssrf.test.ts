import { createServer, type Server } from 'node:net';
import { lookup } from 'node:dns/promises';
import { hostname } from 'node:os';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SecretBox } from '../../src/shared/crypto.js';
import { newId } from '../../src/shared/ids.js';
import { insertWebhookEndpoint } from '../../src/storage/repos/webhooks.js';
import { isPublicAddress, publicOnlyLookup, urlProblem } from '../../src/shared/targets.js';
import { send } from '../../src/shared/outbound-post.js';
import { buildTestApp, TEST_SECRET_KEY, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { addMember, quickUser } from '../helpers/members.js';
import { startReceiver } from '../helpers/webhook-receiver.js';

// The SSRF rules of webhook deliveries (docs/webhooks.md, "Where deliveries may go"), in production mode.

// This machine's own name, when it resolves only to loopback or private addresses (it usually does):
// a name that resolved to a public address when registered and to this one now is the rebinding case.
const OWN_NAME = hostname();
const ownNameIsPrivate = await lookup(OWN_NAME, { all: true }).then(
  (entries) => entries.length > 0 && entries.every((entry) => !isPublicAddress(entry.address)),
  () => false,
);

describe('which addresses are public', () => {
  it.each([
    ['8.8.8.8', true],
    ['2606:4700:4700::1111', true],
    ['127.0.0.1', false],
    ['127.8.9.10', false],
    ['::1', false],
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['fe80::1', false],
    ['fc00::1', false],
    ['fd12:3456::1', false],
    ['100.64.0.1', false],
    ['224.0.0.1', false],
    ['ff02::1', false],
    ['0.0.0.0', false],
    ['::', false],
    ['255.255.255.255', false],
    ['192.0.2.10', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:169.254.169.254', false],
    ['::ffff:8.8.8.8', true],
    ['64:ff9b::a9fe:a9fe', false],
    ['2002:a9fe:a9fe::1', false],
    ['not an address', false],
  ])('%s → %s', (address, expected) => {
    expect(isPublicAddress(address)).toBe(expected);
  });

  it('refuses in production: http, loopback and private literals, localhost; allows them in development', () => {
    const strict = { publicOnly: true };
    expect(urlProblem('http://example.com/hook', strict)).toBe('must be an https URL');
    expect(urlProblem('https://127.0.0.1/hook', strict)).toBe('must be a public address');
    expect(urlProblem('https://[::1]/hook', strict)).toBe('must be a public address');
    expect(urlProblem('https://169.254.169.254/latest/meta-data', strict)).toBe('must be a public address');
    expect(urlProblem('https://localhost/hook', strict)).toBe('must be a public address');
    expect(urlProblem('https://example.com/hook', strict)).toBeNull();
    expect(urlProblem('http://127.0.0.1:3000/hook', { publicOnly: false })).toBeNull();
  });

  it('refuses at connect time a name that resolves to a non-public address', async () => {
    const result = await new Promise<Error | null>((resolve) => publicOnlyLookup('localhost', { all: true }, (error) => resolve(error)));
    expect(result?.message).toMatch(/non-public/);
  });
});

describe('deliveries in production mode', () => {
  let t: TestApp;
  let appId: string;
  let key: string;
  let tcp: Server;
  let port: number;
  let connections = 0;

  beforeAll(async () => {
    t = await buildTestApp({ env: { NODE_ENV: 'production', BASE_URL: 'https://id.example' } });
    const developer = await createDeveloperViaApi(t);
    key = developer.apiKey;
    const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(key), payload: appBody() });
    appId = created.json().id;
    // Counts every connection made to it: a refused delivery must never reach it.
    tcp = createServer((socket) => {
      connections++;
      socket.destroy();
    });
    await new Promise<void>((resolve) => tcp.listen(0, '127.0.0.1', resolve));
    port = (tcp.address() as AddressInfo).port;
  });
  afterAll(async () => {
    await new Promise((resolve) => tcp?.close(resolve));
    await t?.close();
  });

  it('is the production rule set', () => {
    expect(t.config.production).toBe(true);
    expect(t.config.webhooks.publicOnly).toBe(true);
  });

  it.each([
    ['http://example.com/hook', 'must be an https URL'],
    ['https://127.0.0.1/hook', 'must be a public address'],
    ['https://169.254.169.254/latest/meta-data', 'must be a public address'],
    ['https://[::ffff:10.0.0.1]/hook', 'must be a public address'],
    ['https://localhost/hook', 'must be a public address'],
  ])('refuses to register %s', async (url, message) => {
    const res = await t.app.inject({ method: 'POST', url: `/v1/dev/apps/${appId}/webhooks`, headers: bearer(key), payload: { url } });
    expect(res.statusCode).toBe(400);
    expect(res.json()).toMatchObject({ code: 'invalid_request', details: [{ path: 'body.url', message }] });
  });

  it.skipIf(!ownNameIsPrivate)('never connects to a name that resolves to a private address (checked when connecting: DNS rebinding gains nothing)', async () => {
    const url = `https://${OWN_NAME}:${port}/hook`;
    expect(urlProblem(url, { publicOnly: true })).toBeNull();
    const endpointId = newId('whe');
    const now = t.clock.now();
    await insertWebhookEndpoint(t.db, {
      id: endpointId,
      app_id: appId,
      url,
      description: null,
      event_types: '[]',
      enabled: 1,
      secret_sealed: new SecretBox(TEST_SECRET_KEY, 'webhook-secret').seal('whsec_' + Buffer.alloc(32, 1).toString('base64')),
      created_at: now,
      updated_at: now,
    });
    const user = await quickUser(t);
    await addMember(t, { id: appId } as never, user);
    const blocked = await t.app.inject({ method: 'PATCH', url: `/v1/dev/apps/${appId}/users/${user.id}`, headers: bearer(key), payload: { status: 'blocked' } });
    expect(blocked.statusCode).toBe(200);
    await t.app.webhookDeliverer.drain();
    const log = await t.app.inject({ method: 'GET', url: `/v1/dev/apps/${appId}/webhooks/${endpointId}/deliveries`, headers: bearer(key) });
    const [delivery] = log.json().items;
    expect(delivery).toMatchObject({ status: 'pending', attempts: 1, last_status_code: null });
    expect(delivery.last_error).toMatch(/^refused: .*non-public address/);
    expect(connections).toBe(0);
  });

  it('never connects to a private literal even when one is stored', async () => {
    for (const url of [`https://127.0.0.1:${port}/hook`, 'https://169.254.169.254/latest/meta-data', `http://127.0.0.1:${port}/hook`]) {
      const result = await send({ url, headers: {}, body: '{}' }, { publicOnly: true });
      expect(result.ok).toBe(false);
      expect(result.error).toMatch(/^refused/);
    }
    expect(connections).toBe(0);
  });
});

describe('responses', () => {
  it('follows no redirect, reads a few KB at most, and gives up after the timeout', async () => {
    const target = await startReceiver();
    const redirecting = await startReceiver();
    redirecting.respond = () => ({ status: 302, headers: { location: target.url } });
    const redirected = await send({ url: redirecting.url, headers: {}, body: '{}' }, { publicOnly: false });
    expect(redirected).toMatchObject({ ok: false, statusCode: 302, error: 'redirect (302) not followed' });
    await new Promise((resolve) => setTimeout(resolve, 100));
    expect(target.received).toHaveLength(0);

    target.respond = () => ({ status: 200, body: 'y'.repeat(1_000_000) });
    const big = await send({ url: target.url, headers: {}, body: '{}' }, { publicOnly: false });
    expect(big.ok).toBe(true);
    expect(big.excerpt!.length).toBeLessThanOrEqual(300);

    target.respond = () => ({ status: 200, delayMs: 2000 });
    const started = Date.now();
    const slow = await send({ url: target.url, headers: {}, body: '{}' }, { publicOnly: false }, 300);
    expect(slow).toMatchObject({ ok: false, statusCode: null, error: 'timed out after 0.3 s' });
    expect(Date.now() - started).toBeLessThan(1500);
    await target.close();
    await redirecting.close();
  });
});
