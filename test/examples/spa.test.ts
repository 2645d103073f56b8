import type { ChildProcess } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import type { TestApp } from '../helpers/app.js';
import { PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';
import { listeningWithApp, startExampleServer } from '../helpers/examples.js';
import { freePort } from '../helpers/processes.js';

/**
 * The single-page app quickstart (docs/quickstart/spa.md) runs as written: examples/spa served by its
 * serve.mjs, oidc-client-ts in Chromium, signing in through the hosted pages, renewing, signing out.
 */
describe.skipIf(!haveChromium)('quickstart: a single-page app with oidc-client-ts', () => {
  let t: TestApp;
  let spa: ChildProcess;
  let browser: Browser;
  let spaOrigin: string;
  const email = uniqueEmail('spa-quickstart');

  beforeAll(async () => {
    const spaPort = await freePort();
    spaOrigin = `http://localhost:${spaPort}`;
    const started = await listeningWithApp({ name: 'Quickstart SPA', type: 'public', redirect_uris: [`${spaOrigin}/callback`, `${spaOrigin}/`] }, { person: { email, password: PASSWORD } });
    t = started.t;
    ({ process: spa } = await startExampleServer('examples/spa/serve.mjs', { GATEHOUSE_URL: started.base, CLIENT_ID: started.client.id, PORT: String(spaPort) }));
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    spa?.kill();
    await t?.close();
  });

  it('signs in through the hosted pages, renews the access token, and signs out', async () => {
    const page = await (await browser.newContext()).newPage();
    const failures: string[] = [];
    page.on('pageerror', (error) => failures.push(error.message));
    await page.goto(`${spaOrigin}/`);
    await page.waitForSelector('#status:has-text("You are not signed in.")');
    await page.click('#sign-in');
    await page.waitForURL((u) => u.pathname === '/login');
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[name=action][value=login]');
    // Consent: signing up consented to the app's default scopes, not to staying signed in (offline_access).
    await page.waitForURL((u) => u.pathname === '/consent');
    await page.click('button[name=action][value=allow]');
    await page.waitForSelector(`#status:has-text("Signed in as ${email}")`);
    expect(new URL(page.url()).pathname).toBe('/');

    await page.click('#renew');
    await page.waitForSelector(`#status:has-text("Renewed: a new access token for ${email}")`);

    await page.click('#sign-out');
    await page.waitForURL((u) => u.pathname === '/oauth/logout');
    await page.click('button[name=action][value=logout]');
    await page.waitForURL((u) => u.href.startsWith(`${spaOrigin}/`));
    await page.waitForSelector('#status:has-text("You are not signed in.")');
    expect(failures).toEqual([]);
  });
});
