import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { newId } from '../../src/shared/ids.js';
import { insertIdentity } from '../../src/storage/repos/idp.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { appBody, bearer, createDeveloperViaApi } from '../helpers/dev-api.js';
import { makeUser } from '../helpers/factories.js';
import { PASSWORD, uniqueEmail } from '../helpers/oauth-flows.js';
import { startProvider, type TestProvider } from '../helpers/oidc-provider.js';
import { freePort } from '../helpers/processes.js';

const REDIRECT = 'com.example.app:/oauth2redirect';

/** Runs an example with `env`; `lines()` is what it printed so far, `exited` its exit code. */
function runExample(script: string, env: Record<string, string>) {
  const child: ChildProcess = spawn(process.execPath, [script], { env: { ...process.env, ...env } });
  let output = '';
  child.stdout!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  child.stderr!.on('data', (chunk: Buffer) => (output += chunk.toString()));
  const exited = new Promise<number | null>((resolve) => child.on('exit', resolve));
  const printed = (pattern: RegExp) =>
    new Promise<string>((resolve, reject) => {
      const look = () => {
        const match = pattern.exec(output);
        if (match) resolve(match[1]!);
        return Boolean(match);
      };
      if (look()) return;
      child.stdout!.on('data', look);
      void exited.then(() => look() || reject(new Error(`${script} exited before printing ${pattern}:\n${output}`)));
    });
  return { child, exited, printed, lines: () => output.trim().split('\n') };
}

/**
 * The native-app quickstart (docs/quickstart/native-app.md) runs as written. Path B: examples/native-app/
 * system-browser.mjs prints the sign-in address, Chromium plays the system browser, and the redirect to
 * the app's custom scheme (which the OS would hand to the app) is read off the browser's own response and
 * typed into the example. Path A: oidc-provider on loopback is the external provider whose id_token the
 * SDK returned; examples/native-app/provider-token.mjs trades it, and Chromium plays the web view of the
 * hosted consent step.
 */
describe.skipIf(!haveChromium)('quickstart: a native app', () => {
  let t: TestApp;
  let p: TestProvider;
  let browser: Browser;
  let base: string;
  let clientId: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    p = await startProvider({ redirectUris: [`${base}/oauth/idp/callback`] });
    t = await buildTestApp({ env: { BASE_URL: base, IDP_ISSUER: p.issuer, IDP_CLIENT_ID: p.clientId, IDP_CLIENT_SECRET: p.clientSecret, IDP_NAME: 'TestIdP' } });
    await t.app.listen({ port, host: '127.0.0.1' });
    const developer = await createDeveloperViaApi(t);
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/dev/apps',
      headers: bearer(developer.apiKey),
      payload: appBody({ name: 'Quickstart mobile app', type: 'public', redirect_uris: [REDIRECT] }),
    });
    expect(created.statusCode, created.body).toBe(201);
    clientId = created.json().id;
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await t?.close();
    await p?.close();
  });

  it('path B: the system browser signs in and the custom-scheme redirect carries the code back to the app', async () => {
    const email = uniqueEmail('native-b');
    const registered = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password: PASSWORD, client_id: clientId } });
    expect(registered.statusCode, registered.body).toBe(201);
    const example = runExample('examples/native-app/system-browser.mjs', { GATEHOUSE_URL: base, CLIENT_ID: clientId });
    const address = await example.printed(/Open in the system browser: (\S+)/);

    const page = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
    // The browser's navigation to the app's scheme (Gatehouse's 302 followed): what the OS would hand to the app.
    const handedToApp = page.waitForRequest((request) => request.url().startsWith(`${REDIRECT}?`));
    await page.goto(address);
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[name=action][value=login]');
    await page.waitForURL((u) => u.pathname === '/consent');
    await page.click('button[name=action][value=allow]', { noWaitAfter: true });
    const redirect = (await handedToApp).url();
    expect(new URL(redirect).searchParams.get('iss')).toBe(base);
    example.child.stdin!.end(`${redirect}\n`);

    expect(await example.exited, example.lines().join('\n')).toBe(0);
    expect(example.lines().slice(1)).toEqual([`Signed in as ${email}`, 'Renewed: true']);
    await page.context().close();
  }, 60_000);

  it('path A: the provider id_token is exchanged, the hosted consent step runs in a web view, resume gives the code', async () => {
    const user = await makeUser(t.app, { email: uniqueEmail('native-a') });
    await insertIdentity(t.db, { id: newId('pid'), userId: user.id, issuer: p.issuer, subject: 'native-a-sub', email: null, createdAt: t.clock.now() });
    // What Sign in with Apple does with the app's nonce: the token carries its SHA-256, the app keeps the raw one.
    const nonce = 'raw-nonce-0123456789';
    const idToken = await p.sign(p.claims('native-a-sub', { nonce: createHash('sha256').update(nonce).digest('hex') }));
    const example = runExample('examples/native-app/provider-token.mjs', { GATEHOUSE_URL: base, CLIENT_ID: clientId, ID_TOKEN: idToken, NONCE: nonce });
    const hostedUrl = await example.printed(/Step "consent": open in a web view: (\S+)/);
    expect(hostedUrl).toMatch(new RegExp(`^${base}/continue\\?ticket=tk_`));

    // The web view: the app stops it at the navigation to /oauth/authorize…&consent=1 and resumes.
    const page = await (await browser.newContext({ javaScriptEnabled: false })).newPage();
    await page.route(`${base}/oauth/authorize*`, (route) => route.fulfill({ status: 200, body: '' }));
    const reached = page.waitForRequest((request) => request.url().startsWith(`${base}/oauth/authorize`));
    await page.goto(hostedUrl);
    await page.click('button[name=action][value=allow]');
    example.child.stdin!.end(`${(await reached).url()}\n`);

    expect(await example.exited, example.lines().join('\n')).toBe(0);
    expect(example.lines().slice(1)).toEqual([`Signed in as ${user.email}`, 'Got a refresh token to keep in the keychain: true']);
    await page.context().close();
  }, 60_000);

  it('path A: an id_token of a provider account that is not bound yet fails with idp_oauth_not_bound and the bind page', async () => {
    const example = runExample('examples/native-app/provider-token.mjs', { GATEHOUSE_URL: base, CLIENT_ID: clientId, ID_TOKEN: await p.sign(p.claims('nobody-sub')) });
    expect(await example.exited).not.toBe(0);
    expect(example.lines().join('\n')).toContain(`403 idp_oauth_not_bound: `);
    expect(example.lines().join('\n')).toContain(`(${base}/account?bind=1)`);
  });
});
