import type { ChildProcess } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';
import { startExampleServer } from '../helpers/examples.js';
import { freePort } from '../helpers/processes.js';

/**
 * The server-rendered web app quickstart (docs/quickstart/web-app.md) runs as written: Chromium signs in
 * through examples/web-app/server.mjs and Gatehouse's hosted pages, then signs out.
 */
describe.skipIf(!haveChromium)('quickstart: a server-rendered web app with openid-client', () => {
  let t: TestApp;
  let example: ChildProcess;
  let browser: Browser;
  let appUrl: string;
  const email = uniqueEmail('webapp');

  beforeAll(async () => {
    const [port, appPort] = [await freePort(), await freePort()];
    const base = `http://127.0.0.1:${port}`;
    appUrl = `http://127.0.0.1:${appPort}`;
    t = await buildTestApp({ env: { BASE_URL: base } });
    await t.app.listen({ port, host: '127.0.0.1' });
    const developer = await createDeveloperViaApi(t);
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/dev/apps',
      headers: bearer(developer.apiKey),
      payload: appBody({ name: 'Quickstart web app', type: 'confidential', redirect_uris: [`${appUrl}/callback`, `${appUrl}/`] }),
    });
    expect(created.statusCode, created.body).toBe(201);
    const registered = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password: PASSWORD, client_id: created.json().id, client_secret: created.json().client_secret } });
    expect(registered.statusCode, registered.body).toBe(201);
    ({ process: example } = await startExampleServer('examples/web-app/server.mjs', {
      GATEHOUSE_URL: base,
      CLIENT_ID: created.json().id,
      CLIENT_SECRET: created.json().client_secret,
      APP_URL: appUrl,
    }));
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    example?.kill();
    await t?.close();
  });

  it('signs in through the hosted pages, shows the person, and signs out through Gatehouse', async () => {
    const page = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
    await page.goto(`${appUrl}/`);
    await page.click('a[href="/login"]');
    await page.waitForURL((u) => u.pathname === '/login');
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[name=action][value=login]');
    // No consent page: signing up through this app's REST registration consented to it already.
    await page.waitForURL(`${appUrl}/`);
    expect(await page.textContent('p')).toBe(`Signed in as ${email}`);

    await page.click('form[action="/logout"] button');
    await page.waitForURL((u) => u.pathname === '/oauth/logout');
    await page.click('button[name=action][value=logout]');
    await page.waitForURL((u) => u.href.startsWith(`${appUrl}/`));
    expect(await page.textContent('p')).toBe('You are not signed in.');
  });
});
