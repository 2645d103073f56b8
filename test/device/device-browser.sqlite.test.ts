import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import * as oauth from 'oauth4webapi';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { calculateJwkThumbprint, decodeJwt, exportJWK } from 'jose';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { audit } from '../helpers/axe.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { makeUser } from '../helpers/factories.js';
import { makeClient, PASSWORD, type TestClient } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';

/**
 * The device authorization grant end to end (docs/guides/device-sign-in.md): `oauth4webapi`, unmodified,
 * is the device (device authorization, polling with its own error handling, a DPoP proof on the token
 * request); Chromium is the person, who types the code on `/device`, signs in on the hosted login page,
 * reads the approval page and approves. The `/device` pages pass axe-core at 390 px in light and dark,
 * and are photographed there (`screenshots/device/`, git-ignored). SQLite only: the pages render the same
 * on either database; the grant's storage runs on both in device.test.ts.
 */

const SHOTS = join(process.env.SCREENSHOTS_DIR ?? 'screenshots', 'device');
const SCHEMES = ['light', 'dark'] as const;

describe.skipIf(!haveChromium)('device flow: oauth4webapi as the device, Chromium as the person', () => {
  let t: TestApp;
  let base: string;
  let tv: TestClient;
  let as: oauth.AuthorizationServer;
  let chromium: Browser;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    [t, chromium] = await Promise.all([buildTestApp({ env: { BASE_URL: base } }), launchChromium()]);
    await t.app.listen({ port, host: '127.0.0.1' });
    tv = await makeClient(t, { name: 'Living Room TV', oauth: { dpopBoundAccessTokens: false, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: true } });
    const issuer = new URL(base);
    as = await oauth.processDiscoveryResponse(issuer, await oauth.discoveryRequest(issuer, { [oauth.allowInsecureRequests]: true }));
    mkdirSync(SHOTS, { recursive: true });
  }, 60_000);
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
  });

  /** axe at 390 px in both schemes, with a screenshot of each; the serious or critical violations found. */
  async function checkPage(page: Page, name: string): Promise<string[]> {
    const found: string[] = [];
    await page.setViewportSize({ width: 390, height: 844 });
    for (const scheme of SCHEMES) {
      await page.emulateMedia({ colorScheme: scheme });
      const { serious, passed } = await audit(page);
      expect(passed).toContain('color-contrast');
      for (const v of serious) found.push(`${name} ${scheme}: ${v.id} ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
      await page.screenshot({ path: join(SHOTS, `${name}-390-${scheme}.png`), fullPage: true });
    }
    return found;
  }

  it('the device polls (authorization_pending), the person enters the code, signs in and approves; the device gets DPoP-bound tokens', async () => {
    const client: oauth.Client = { client_id: tv.app.id };
    const options = { [oauth.allowInsecureRequests]: true };
    expect(as.device_authorization_endpoint).toBe(`${base}/oauth/device_authorization`);
    const started = await oauth.processDeviceAuthorizationResponse(as, client, await oauth.deviceAuthorizationRequest(as, client, oauth.None(), { scope: 'openid profile offline_access' }, options));
    expect(started.user_code).toMatch(/^[A-Z]{4}-[A-Z]{4}$/);

    const keyPair = await oauth.generateKeyPair('ES256');
    const dpop = oauth.DPoP(client, keyPair);
    /** One poll as the device makes it: the tokens, or the OAuth error code the server answered. */
    const pollOnce = async (): Promise<oauth.TokenEndpointResponse | string> => {
      for (let attempt = 0; attempt < 2; attempt++) {
        try {
          return await oauth.processDeviceCodeResponse(as, client, await oauth.deviceCodeGrantRequest(as, client, oauth.None(), started.device_code, { ...options, DPoP: dpop }));
        } catch (error) {
          if (oauth.isDPoPNonceError(error)) continue;
          if (error instanceof oauth.ResponseBodyError) return error.error;
          throw error;
        }
      }
      throw new Error('nonce retry did not settle');
    };
    expect(await pollOnce()).toBe('authorization_pending');

    const person = await makeUser(t.app, { email: 'tv.owner@example.com', password: PASSWORD, email_verified: 1, name: 'Tessa' });
    const context = await chromium.newContext();
    const page = await context.newPage();
    const found: string[] = [];
    try {
      await page.goto(started.verification_uri);
      found.push(...(await checkPage(page, 'device-entry')));
      // Typed the way people type it: lower case, no dash.
      await page.fill('input[name=user_code]', started.user_code.replace('-', '').toLowerCase());
      await Promise.all([page.waitForURL(/\/login/), page.click('button[name=action][value=continue]')]);
      await page.fill('input[name=email]', person.email);
      await page.fill('input[name=password]', PASSWORD);
      await Promise.all([page.waitForURL(/\/device\/continue/), page.click('button[name=action][value=login]')]);
      expect(await page.textContent('h1')).toContain('Sign in on your device?');
      expect(await page.textContent('[data-device-code]')).toContain(started.user_code);
      expect(await page.textContent('[data-device-warning]')).toContain('Living Room TV');
      found.push(...(await checkPage(page, 'device-confirm')));

      // Still pending while the person reads (the device waits its interval first: the test clock moves instead).
      t.clock.advance(started.interval ?? 5);
      expect(await pollOnce()).toBe('authorization_pending');

      await Promise.all([page.waitForSelector('[data-device-done="approved"]'), page.click('button[name=action][value=approve]')]);
      found.push(...(await checkPage(page, 'device-done')));
    } finally {
      await context.close();
    }
    expect(found).toEqual([]);

    t.clock.advance(started.interval ?? 5);
    const tokens = await pollOnce();
    if (typeof tokens === 'string') throw new Error(`device got ${tokens}`);
    expect(tokens.token_type.toLowerCase()).toBe('dpop');
    const jkt = await calculateJwkThumbprint(await exportJWK(keyPair.publicKey));
    expect(decodeJwt(tokens.access_token)).toMatchObject({ sub: person.id, cnf: { jkt } });
    expect(tokens.refresh_token).toBeTruthy();
    expect(decodeJwt(tokens.id_token!)).toMatchObject({ sub: person.id, aud: tv.app.id });

    // The refresh token of a public client is bound to the key as well.
    const refreshed = await oauth.processRefreshTokenResponse(as, client, await oauth.refreshTokenGrantRequest(as, client, oauth.None(), tokens.refresh_token!, { ...options, DPoP: dpop }));
    expect(refreshed.access_token).toBeTruthy();
    // And the device code is spent.
    t.clock.advance(started.interval ?? 5);
    expect(await pollOnce()).toBe('invalid_grant');
  }, 120_000);
});
