import { spawn, type ChildProcess } from 'node:child_process';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import type { TestApp } from '../helpers/app.js';
import { listeningWithApp } from '../helpers/examples.js';
import { PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';

/**
 * The command-line app quickstart (docs/quickstart/cli-app.md) runs as written: examples/cli-app prints
 * the sign-in address, Chromium plays the system browser, and the app finishes on its loopback redirect.
 */
describe.skipIf(!haveChromium)('quickstart: a command-line app signing in through the system browser', () => {
  let t: TestApp;
  let browser: Browser;
  let env: Record<string, string>;
  const email = uniqueEmail('cli-quickstart');

  beforeAll(async () => {
    const callbackPort = await freePort();
    const started = await listeningWithApp({ name: 'Quickstart CLI', type: 'public', redirect_uris: [`http://127.0.0.1:${callbackPort}/callback`] }, { person: { email, password: PASSWORD } });
    t = started.t;
    env = { GATEHOUSE_URL: started.base, CLIENT_ID: started.client.id, CALLBACK_PORT: String(callbackPort), NO_BROWSER: '1' };
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  it('prints the address, gets the code on its loopback redirect, and renews with the refresh token', async () => {
    const app: ChildProcess = spawn(process.execPath, ['examples/cli-app/index.mjs'], { env: { ...process.env, ...env } });
    let output = '';
    const exited = new Promise<number | null>((resolve) => app.on('exit', resolve));
    const address = await new Promise<string>((resolve) =>
      app.stdout!.on('data', (chunk: Buffer) => {
        output += chunk.toString();
        const match = /Open this address to sign in: (\S+)/.exec(output);
        if (match) resolve(match[1]!);
      }),
    );
    const page = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
    await page.goto(address);
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[name=action][value=login]');
    // Consent: signing up consented to the app's default scopes, not to staying signed in (offline_access).
    await page.waitForURL((u) => u.pathname === '/consent');
    await page.click('button[name=action][value=allow]');
    await page.waitForURL((u) => u.pathname === '/callback');
    expect(await page.textContent('body')).toContain('Signed in. You can close this tab');
    expect(await exited).toBe(0);
    expect(output.trim().split('\n').slice(1)).toEqual([`Signed in as ${email}`, 'Got a refresh token to keep in the system keychain: true', 'Renewed: true']);
  });
});
