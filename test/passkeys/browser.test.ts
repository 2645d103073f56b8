import { decodeJwt } from 'jose';
import type { BrowserContext, Browser as PwBrowser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { countAll } from '../helpers/db.js';
import { makeUser } from '../helpers/factories.js';
import { authorizeUrl, exchangeCode, makeClient, type TestClient } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';

/**
 * Passkeys in Chromium with a CDP virtual authenticator (internal transport, resident keys, user
 * verification) on a real listening Gatehouse at http://localhost:PORT (browsers refuse WebAuthn on an
 * IP-address origin): add a passkey on /account through the page script, sign out, sign in with it
 * through /oauth/authorize of an app, and get tokens whose ID token says `amr: ["swk"]` (no attestation is asked for, so nothing claims hardware); another
 * authenticator without the credential cannot sign in; removing the passkey needs it as a second
 * factor first (/mfa), and a removed passkey stops working.
 */

describe.skipIf(!haveChromium)('passkeys in Chromium (virtual authenticator)', () => {
  let t: TestApp;
  let base: string;
  let browser: PwBrowser;
  let client: TestClient;
  /** The app's redirect URI: a loopback page of the test server itself (it answers 404; the URL is what counts). */
  let callbackUrl: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://localhost:${port}`;
    t = await buildTestApp({ env: { BASE_URL: base, IP_AUTH_PER_MINUTE: '1000' } });
    await t.app.listen({ port, host: '127.0.0.1' });
    callbackUrl = `${base}/app/callback`;
    client = await makeClient(t, { name: 'Passkey Browser App', redirectUris: [callbackUrl] });
    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    await t?.close();
  });

  /**
   * A browser context with its own virtual authenticator. The virtual authenticator answers a conditional (autofill) request at once, which would
   * sign in before any button is clicked: autofill is reported unsupported unless the page's
   * localStorage says `autofill=1`.
   */
  async function contextWithAuthenticator(): Promise<{ context: BrowserContext; page: Page; forgetCredentials: () => Promise<void> }> {
    const context = await browser.newContext();
    await context.addInitScript(() => {
      if (window.PublicKeyCredential && localStorage.getItem('autofill') !== '1') PublicKeyCredential.isConditionalMediationAvailable = async () => false;
    });
    const page = await context.newPage();
    const cdp = await context.newCDPSession(page);
    await cdp.send('WebAuthn.enable');
    const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
      options: { protocol: 'ctap2', transport: 'internal', hasResidentKey: true, hasUserVerification: true, isUserVerified: true },
    });
    // Another device, as far as the site can tell: an authenticator holding the account's passkey refuses to make a second one.
    const forgetCredentials = async () => void (await cdp.send('WebAuthn.clearCredentials', { authenticatorId }));
    return { context, page, forgetCredentials };
  }

  /**
   * Runs /oauth/authorize with a passkey on /login: the button, or (`autofill`) the email field's
   * passkey suggestion, which the virtual authenticator takes at once. Consents when asked; returns the
   * callback URL and the PKCE verifier.
   */
  async function authorizeWithPasskey(page: Page, how: 'button' | 'autofill'): Promise<{ callback: string; verifier: string }> {
    const { url, verifier } = authorizeUrl(client, { extra: { nonce: 'n-passkey' } });
    await page.goto(`${base}${url}`);
    if (how === 'button') {
      await page.waitForURL(/\/login/);
      await page.click('button[name=action][value=passkey]');
    }
    await page.waitForURL((u) => u.href.startsWith(callbackUrl) || u.pathname === '/consent');
    if (new URL(page.url()).pathname === '/consent') {
      await page.click('button[name=action][value=allow]');
      await page.waitForURL((u) => u.href.startsWith(callbackUrl));
    }
    return { callback: page.url(), verifier: verifier! };
  }

  /** Signs in on /account with the password and adds a passkey (the account's first factor: its recovery codes are shown once). */
  async function addFirstPasskey(page: Page, user: { email: string; password: string }, name?: string) {
    await page.goto(`${base}/account`);
    await page.fill('input[name=email]', user.email);
    await page.fill('input[name=password]', user.password);
    await page.click('button[name=action][value=login]');
    await page.waitForSelector('#passkey-add:not([hidden])');
    if (name) await page.fill('#passkey-new-name', name);
    await page.click('button[name=action][value=add_passkey]');
    await page.waitForSelector('[data-field=recovery_code]');
    expect(await page.locator('[data-field=recovery_code]').count()).toBe(10);
    await page.click('a[href="/account#passkeys"]');
    await page.waitForSelector('form[data-passkey]');
  }

  it('adds a passkey on /account, then signs in with it through /oauth/authorize (button, then autofill): the ID token says amr swk', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const { context, page } = await contextWithAuthenticator();

    await addFirstPasskey(page, user, 'Virtual key');
    expect(await page.inputValue('form[data-passkey] input[name=name]')).toBe('Virtual key');
    expect(await countAll(t.db, 'passkeys', { user_id: user.id })).toBe(1);

    await page.click('button[name=action][value=logout]');
    await page.waitForSelector('input[name=password]');

    for (const how of ['button', 'autofill'] as const) {
      if (how === 'autofill') {
        await page.goto(`${base}/account`);
        await page.click('button[name=action][value=logout]');
        await page.waitForSelector('input[name=password]');
        await page.evaluate(() => localStorage.setItem('autofill', '1'));
      }
      const { callback, verifier } = await authorizeWithPasskey(page, how);
      const code = new URL(callback).searchParams.get('code')!;
      const tokens = await exchangeCode(t.app, client, code, verifier);
      expect(tokens.statusCode, tokens.body).toBe(200);
      expect(decodeJwt(tokens.json().id_token), how).toMatchObject({ sub: user.id, aud: client.app.id, nonce: 'n-passkey', amr: ['swk'] });
    }
    await context.close();
  }, 120_000);

  it('a second passkey: the account page offers the second-factor check that adding it asks for, and after that check the passkey is added', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const { context, page, forgetCredentials } = await contextWithAuthenticator();
    await addFirstPasskey(page, user);
    // The password alone may not add a factor to an account that has one: the refusal points at the
    // check, and the check is on the page (it was missing unless an earlier change had failed).
    await page.click('#passkey-add button[name=action][value=add_passkey]');
    await page.waitForSelector('#passkey-add p.error:not([hidden])');
    expect(await page.locator('form[data-passkey]').count()).toBe(1);
    await page.click('button[name=action][value=reauth]');
    await page.waitForURL(/\/mfa$/);
    await page.click('#passkey-signin button[name=action][value=passkey]');
    await page.waitForURL((u) => u.pathname === '/account');
    await page.waitForSelector('#passkey-add:not([hidden])');
    await forgetCredentials();
    await page.fill('#passkey-new-name', 'Second key');
    await page.click('#passkey-add button[name=action][value=add_passkey]');
    await page.waitForSelector('form[data-passkey] >> nth=1');
    expect(await countAll(t.db, 'passkeys', { user_id: user.id })).toBe(2);
    await context.close();
  }, 120_000);

  it('another authenticator without the credential cannot sign in; removal asks for the passkey at /mfa; a removed passkey stops working', async () => {
    const user = await makeUser(t.app, { email_verified: 1 });
    const { context, page } = await contextWithAuthenticator();
    await addFirstPasskey(page, user);

    // A second browser with an authenticator of its own: no passkey to offer, nobody signed in.
    const stranger = await contextWithAuthenticator();
    await stranger.page.goto(`${base}/login`);
    await stranger.page.click('button[name=action][value=passkey]');
    await stranger.page.waitForSelector('#passkey-signin p.error:not([hidden])', { timeout: 20_000 });
    expect(new URL(stranger.page.url()).pathname).toBe('/login');
    await stranger.context.close();

    // The password session may not remove the account's factor: "verify again" asks for the passkey
    // itself at /mfa (the second factor), then the removal goes through.
    await page.click('form[data-passkey] button[name=action][value=remove_passkey]');
    await page.waitForURL(/mfa_error=change/);
    expect(await page.locator('form[data-passkey]').count()).toBe(1);
    await page.click('button[name=action][value=reauth]');
    await page.waitForURL(/\/mfa$/);
    await page.click('#passkey-signin button[name=action][value=passkey]');
    await page.waitForURL((u) => u.pathname === '/account');
    // The authenticator still holds the passkey, but once removed it no longer signs in.
    await page.click('form[data-passkey] button[name=action][value=remove_passkey]');
    await page.waitForSelector('#passkey-add:not([hidden])');
    expect(await page.locator('form[data-passkey]').count()).toBe(0);
    await page.click('button[name=action][value=logout]');
    await page.waitForSelector('input[name=password]');
    await page.goto(`${base}/login`);
    await page.click('button[name=action][value=passkey]');
    await page.waitForURL(/\/login\/passkey/);
    expect(await page.textContent('p.error')).toContain('could not be verified');
    expect(page.url()).not.toContain('/app/callback');
    await context.close();
  }, 120_000);
});
