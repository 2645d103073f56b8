import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { csrfOf } from '../helpers/oauth-flows.js';
import { startReceiver, type Receiver } from '../helpers/webhook-receiver.js';
import { consoleSignIn, developerBrowser, followShownOnce, postForm } from '../console/console-helpers.js';

// The console's webhooks pages (docs/webhooks.md, "In the console").

describe('console: webhooks of an app', () => {
  let t: TestApp;
  let receiver: Receiver;
  beforeAll(async () => {
    t = await buildTestApp();
    receiver = await startReceiver();
  });
  afterAll(async () => {
    await receiver?.close();
    await t?.close();
  });

  /** Drains the outbox; the background pass may hold a row's lease meanwhile, so also waits for leased rows to settle. */
  async function deliver(): Promise<void> {
    await t.app.webhookDeliverer.drain();
    await expect.poll(async () => (await t.db.selectFrom('webhook_deliveries').select('id').where('status', '=', 'pending').where('locked_until', '>', t.clock.now()).execute()).length).toBe(0);
  }

  it('adds an endpoint (secret shown once), sends a test event, shows the log, redelivers, and says why the server disabled it', async () => {
    const { browser, email } = await developerBrowser(t);
    await consoleSignIn(browser);
    const posted = await postForm(browser, '/console', '/console/apps', { action: 'create', name: 'Shop', type: 'public', redirect_uris: 'https://shop.example/cb', features: 'auth' });
    const appId = /^\/console\/apps\/([^/?]+)$/.exec(String(posted.headers.location))![1]!;
    const list = `/console/apps/${appId}/webhooks`;

    const empty = await browser.get(list);
    expect(empty.statusCode).toBe(200);
    expect(empty.body).toContain('No endpoints yet.');
    expect(empty.body).toMatch(/aria-current="page"[^>]*>Webhooks</);

    const bad = await postForm(browser, list, list, { action: 'create', url: 'ftp://x.example/hook' });
    expect(bad.statusCode).toBe(400);
    expect(bad.body).toMatch(/id="url-error"[^>]*>must be an https URL/);

    const created = await postForm(browser, list, list, { action: 'create', url: receiver.url, description: 'orders', event_types: 'user.signed_in' });
    const endpointId = /\/webhooks\/([^/?]+)$/.exec(String(created.headers.location))![1]!;
    const here = `${list}/${endpointId}`;
    const { page, secret } = await followShownOnce(browser, created, here, 'webhook_secret');
    expect(secret).toMatch(/^whsec_/);
    expect(page.body).toContain('value="user.signed_in" checked');
    receiver.secrets = [secret];

    const tested = await postForm(browser, here, here, { action: 'test' });
    expect(tested.statusCode).toBe(303);
    await deliver();
    await receiver.waitFor(1);
    expect(receiver.received[0]!.verified).toMatchObject({ type: 'webhook.test', data: { app_id: appId } });
    const log = await browser.get(here);
    expect(log.body).toMatch(/data-status="delivered"/);
    expect(log.body).toMatch(/data-status-code>204</);

    // A failing endpoint: the response code and the start of its body in the log, then disabled after 3 days.
    receiver.respond = () => ({ status: 503, body: 'maintenance <b>window</b>' });
    await postForm(browser, here, here, { action: 'test' });
    await deliver();
    await receiver.waitFor(2);
    const failing = await browser.get(here);
    expect(failing.body).toMatch(/data-status-code>503</);
    expect(failing.body).toContain('maintenance &lt;b&gt;window&lt;/b&gt;');
    expect(failing.body).toContain('data-state="failing-since"');
    t.clock.advance(3 * 24 * 3600 + 60);
    await deliver();
    // Three days on, the sessions have lapsed: sign in again.
    await browser.login(email);
    await consoleSignIn(browser, list);
    const disabled = await browser.get(list);
    expect(disabled.body).toContain('data-state="failing"');
    expect(disabled.body).toContain('Disabled by the server: every delivery failed for 3 days');
    const detail = await browser.get(here);
    expect(detail.body).toMatch(/role="alert" data-state="failing"/);

    // Enabled again and redelivered: the same webhook-id arrives.
    receiver.respond = () => ({ status: 204 });
    const saved = await postForm(browser, here, here, { action: 'save', url: receiver.url, description: 'orders', event_types: 'user.signed_in', enabled: '1' });
    expect(saved.statusCode).toBe(303);
    const failedId = receiver.received[1]!.id;
    const again = await browser.get(here);
    const redo = await browser.post(here, { csrf: csrfOf(again.body), action: 'redeliver', delivery_id: failedId });
    expect(redo.statusCode).toBe(303);
    const count = receiver.received.length;
    await deliver();
    await receiver.waitFor(count + 1);
    expect(receiver.received[count]!.id).toBe(failedId);

    // Rotation shows a new secret once; delete goes back to the list.
    const rotated = await followShownOnce(browser, await postForm(browser, here, here, { action: 'rotate_secret' }), here, 'webhook_secret');
    expect(rotated.secret).not.toBe(secret);
    expect(rotated.page.body).toContain('The previous secret also signs until');
    const deleted = await postForm(browser, here, here, { action: 'delete' });
    expect(deleted.headers.location).toBe(`${list}?deleted=1`);
    expect((await browser.get(here)).statusCode).toBe(404);
  });

  it("answers 404 for another developer's app and endpoint", async () => {
    const owner = await developerBrowser(t);
    await consoleSignIn(owner.browser);
    const posted = await postForm(owner.browser, '/console', '/console/apps', { action: 'create', name: 'Mine', type: 'public', redirect_uris: 'https://mine.example/cb', features: 'auth' });
    const appId = /^\/console\/apps\/([^/?]+)$/.exec(String(posted.headers.location))![1]!;
    const other = await developerBrowser(t);
    await consoleSignIn(other.browser);
    expect((await other.browser.get(`/console/apps/${appId}/webhooks`)).statusCode).toBe(404);
  });
});
