import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { decodeJwt } from 'jose';
import type { Browser as PwBrowser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient, PASSWORD, refresh, type TestClient, uniqueEmail, userinfo } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';

/**
 * End to end with `oidc-client-ts` (docs/reference/oauth.md#openid-connect-what-is-implemented, issue 12): the library's own browser build, used
 * unmodified by a single-page app served to Chromium from an origin the app registered (so CORS
 * allows it), signs in through the hosted pages, refreshes, revokes and signs out with
 * `signoutRedirect()`, which sends `id_token_hint` and no `client_id` (RP-Initiated Logout 1.0).
 */

const require = createRequire(import.meta.url);
const OIDC_CLIENT_BUNDLE = join(dirname(require.resolve('oidc-client-ts/package.json')), 'dist/browser/oidc-client-ts.min.js');

/** The single-page app: one page for every path; it exposes its UserManager as `window.mgr`. */
const spaPage = (settings: Record<string, unknown>) => `<!doctype html>
<html><head><meta charset="utf-8"><title>SPA</title>
<script src="/oidc-client-ts.min.js"></script>
<script>window.mgr = new oidc.UserManager(${JSON.stringify(settings)});</script>
</head><body>spa</body></html>`;

describe.skipIf(!haveChromium)('oidc-client-ts in Chromium against Gatehouse', () => {
  let t: TestApp;
  let base: string;
  let spaOrigin: string;
  let spaServer: Server;
  let browser: PwBrowser;
  let client: TestClient;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({ env: { BASE_URL: base } });
    await t.app.listen({ port, host: '127.0.0.1' });

    // http://localhost is a secure context (WebCrypto for PKCE) and another site than 127.0.0.1.
    const spaPort = await freePort();
    spaOrigin = `http://localhost:${spaPort}`;
    client = await makeClient(t, { name: 'SPA', redirectUris: [`${spaOrigin}/cb`, `${spaOrigin}/bye`] });
    const html = spaPage({
      authority: base,
      client_id: client.app.id,
      redirect_uri: `${spaOrigin}/cb`,
      post_logout_redirect_uri: `${spaOrigin}/bye`,
      scope: 'openid profile email offline_access',
      loadUserInfo: true,
      automaticSilentRenew: false,
    });
    const bundle = readFileSync(OIDC_CLIENT_BUNDLE);
    spaServer = createServer((req, res) => {
      if ((req.url ?? '').startsWith('/oidc-client-ts.min.js')) res.writeHead(200, { 'content-type': 'text/javascript' }).end(bundle);
      else res.writeHead(200, { 'content-type': 'text/html' }).end(html);
    });
    await new Promise<void>((resolve) => spaServer.listen(spaPort, '127.0.0.1', resolve));

    browser = await launchChromium();
  }, 60_000);

  afterAll(async () => {
    await browser?.close();
    spaServer?.close();
    await t?.close();
  });

  it('signs in, refreshes, revokes and signs out with signoutRedirect()', async () => {
    const context = await browser.newContext();
    const page = await context.newPage();
    const failures: string[] = [];
    page.on('pageerror', (error) => failures.push(error.message));

    // Sign in: signinRedirect() → hosted register page → consent → back to the app's callback.
    await page.goto(`${spaOrigin}/`);
    await page.evaluate(() => void (window as any).mgr.signinRedirect());
    await page.waitForURL((u) => u.pathname === '/login');
    await page.click('a[href^="/register"]');
    const email = uniqueEmail('spa');
    await page.fill('input[name=email]', email);
    await page.fill('input[name=name]', 'Sam Spa');
    await page.fill('input[name=password]', PASSWORD);
    await page.click('button[name=action][value=register]');
    // Confirming the address is offered next, and may wait.
    await page.waitForURL(/\/verify-email\?after=register/);
    await page.click('a[data-verify-later]');
    await page.waitForURL(/\/consent/);
    await page.click('button[name=action][value=allow]');
    await page.waitForURL((u) => u.href.startsWith(`${spaOrigin}/cb?`));
    const user = await page.evaluate(async () => {
      const u = await (window as any).mgr.signinCallback();
      return { profile: u.profile, accessToken: u.access_token, refreshToken: u.refresh_token, idToken: u.id_token, scope: u.scope };
    });
    expect(user.profile).toMatchObject({ iss: base, aud: client.app.id, email, name: 'Sam Spa' });
    // The library drops protocol claims from `profile`; they are in the ID token it holds.
    expect(decodeJwt(user.idToken)).toMatchObject({ acr: expect.any(String), auth_time: expect.any(Number) });
    expect(user.scope.split(' ').sort()).toEqual(['email', 'offline_access', 'openid', 'profile']);
    expect(user.refreshToken).toBeTruthy();

    // Refresh: signinSilent() uses the refresh token (a cross-origin POST to /oauth/token).
    const refreshed = await page.evaluate(async () => {
      const u = await (window as any).mgr.signinSilent();
      return { accessToken: u.access_token, refreshToken: u.refresh_token, sub: u.profile.sub };
    });
    expect(refreshed.accessToken).not.toBe(user.accessToken);
    expect(refreshed.refreshToken).not.toBe(user.refreshToken);
    expect(refreshed.sub).toBe(user.profile.sub);

    // Revoke: both tokens through /oauth/revoke; the grant is gone for the app and for Gatehouse's own endpoints.
    await page.evaluate(() => (window as any).mgr.revokeTokens());
    expect((await refresh(t.app, client, refreshed.refreshToken)).json()).toMatchObject({ error: 'invalid_grant' });
    expect((await userinfo(t.app, refreshed.accessToken)).statusCode).toBe(401);

    // Sign out: signoutRedirect() sends id_token_hint without client_id; the user confirms; back with state.
    await page.evaluate(() => void (window as any).mgr.signoutRedirect({ state: { from: 'e2e' } }));
    await page.waitForURL((u) => u.pathname === '/oauth/logout');
    const endSession = new URL(page.url());
    expect(endSession.searchParams.get('id_token_hint')).toBeTruthy();
    expect(endSession.searchParams.get('client_id')).toBeNull();
    const state = endSession.searchParams.get('state');
    expect(state).toBeTruthy();
    expect(await page.textContent('body')).toContain('SPA');
    await page.click('button[name=action][value=logout]');
    await page.waitForURL((u) => u.href.startsWith(`${spaOrigin}/bye?`));
    expect(new URL(page.url()).searchParams.get('state')).toBe(state);
    const signedOut = await page.evaluate(async () => {
      const response = await (window as any).mgr.signoutCallback(); // matches the returned state to the one it stored
      return { userState: response?.userState, user: await (window as any).mgr.getUser() };
    });
    expect(signedOut).toEqual({ userState: { from: 'e2e' }, user: null });

    // The Gatehouse session has ended: the account page asks for a password again.
    await page.goto(`${base}/account`);
    expect(await page.locator('input[name=password]').count()).toBeGreaterThan(0);
    expect(await page.locator('button[name=action][value=logout]').count()).toBe(0);
    expect(failures).toEqual([]);
    await context.close();
  });
});
