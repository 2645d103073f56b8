import type { ChildProcess } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import type { TestApp } from '../helpers/app.js';
import { PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';
import { listeningWithApp, startExampleServer } from '../helpers/examples.js';
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
    appUrl = `http://127.0.0.1:${await freePort()}`;
    const started = await listeningWithApp({ name: 'Quickstart web app', type: 'confidential', redirect_uris: [`${appUrl}/callback`, `${appUrl}/`] }, { person: { email, password: PASSWORD } });
    t = started.t;
    ({ process: example } = await startExampleServer('examples/web-app/server.mjs', {
      GATEHOUSE_URL: started.base,
      CLIENT_ID: started.client.id,
      CLIENT_SECRET: started.client.client_secret!,
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
