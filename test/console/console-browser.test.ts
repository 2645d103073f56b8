import { createHash, randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { createRequire } from 'node:module';
import type { Browser, BrowserContext, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDeveloper } from '../../src/admin/service.js';
import { createInvitation } from '../../src/console/service.js';
import { buildTestApp, TEST_ADMIN_TOKEN, type TestApp } from '../helpers/app.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { makeUser } from '../helpers/factories.js';
import { uniqueEmail } from '../helpers/oauth-flows.js';

/**
 * The console in a real browser, once with JavaScript and once without: a developer signs in through
 * the hosted login, creates an app, adds a redirect URI, rotates the secret, finds and blocks a user
 * (who then cannot sign in), and publishes a legal version seen on the hosted legal page. The run with
 * JavaScript also checks every console page with axe-core (light and dark, desktop and 390 px wide,
 * see COMBINATIONS); with CONSOLE_SCREENSHOTS=<dir> it saves a screenshot of each.
 */

declare global {
  interface Window {
    /** axe-core, once its source has been evaluated in the page. */
    axe: { run(options: object): Promise<{ violations: Array<{ id: string; impact?: string | null; nodes: Array<{ target: string[] }> }> }> };
  }
}

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const SHOTS = process.env.CONSOLE_SCREENSHOTS;
const VIEWPORTS = { desktop: { width: 1280, height: 900 }, mobile: { width: 390, height: 844 } } as const;

async function freePort(): Promise<number> {
  const srv = createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as { port: number }).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** Every page is checked (and, with CONSOLE_SCREENSHOTS, photographed) in both schemes at both widths. */
const COMBINATIONS: Array<['light' | 'dark', keyof typeof VIEWPORTS]> = [
  ['light', 'desktop'],
  ['light', 'mobile'],
  ['dark', 'desktop'],
  ['dark', 'mobile'],
];

/** Serious and critical axe violations of the page as it is now (viewport and scheme restored after). */
async function axeProblems(page: Page, name: string): Promise<string[]> {
  const problems: string[] = [];
  for (const [colorScheme, width] of COMBINATIONS) {
    await page.emulateMedia({ colorScheme });
    await page.setViewportSize(VIEWPORTS[width]);
    if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
    const violations = await page.evaluate(async () => {
      const result = await window.axe.run({ resultTypes: ['violations'] });
      return result.violations.filter((v) => v.impact === 'serious' || v.impact === 'critical').map((v) => `${v.id} ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
    });
    problems.push(...violations.map((v) => `${name} ${colorScheme} ${width}: ${v}`));
    if (SHOTS) await page.screenshot({ path: `${SHOTS}/${name}-${width}-${colorScheme}.png`, fullPage: true });
  }
  await page.emulateMedia({ colorScheme: 'light' });
  await page.setViewportSize(VIEWPORTS.desktop);
  return problems;
}

describe.skipIf(!haveChromium)('developer console in a real browser', () => {
  let t: TestApp;
  let chromium: Browser;
  let base: string;

  beforeAll(async () => {
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    t = await buildTestApp({ env: { BASE_URL: base } });
    await t.app.listen({ port, host: '127.0.0.1' });
    chromium = await launchChromium();
    if (SHOTS) mkdirSync(SHOTS, { recursive: true });
  });
  afterAll(async () => {
    await chromium?.close();
    await t?.close();
  });

  async function context(javaScriptEnabled: boolean): Promise<BrowserContext> {
    const ctx = await chromium.newContext({ javaScriptEnabled, viewport: VIEWPORTS.desktop });
    await ctx.route((url) => url.hostname !== '127.0.0.1', (route) => route.abort());
    return ctx;
  }

  async function click(page: Page, action: string) {
    await Promise.all([page.waitForNavigation(), page.click(`button[name=action][value=${action}]`)]);
  }

  /** Signs in on the hosted login page (and allows consent when asked), ending wherever the flow goes. */
  async function hostedLogin(page: Page, email: string, password: string) {
    await page.fill('input[name=email]', email);
    await page.fill('input[name=password]', password);
    await click(page, 'login');
    if (new URL(page.url()).pathname === '/consent') await click(page, 'allow');
  }

  /** An end user signs in to the app through the hosted login; the page ends at the app's redirect URI. */
  async function endUserSignIn(javaScriptEnabled: boolean, clientId: string, email: string, password: string): Promise<Page> {
    const page = await (await context(javaScriptEnabled)).newPage();
    const verifier = randomBytes(32).toString('base64url');
    const query = new URLSearchParams({
      response_type: 'code',
      client_id: clientId,
      redirect_uri: `${base}/app-callback`,
      scope: 'openid email',
      state: 'st',
      code_challenge: createHash('sha256').update(verifier).digest('base64url'),
      code_challenge_method: 'S256',
    });
    await page.goto(`${base}/oauth/authorize?${query.toString()}`);
    await hostedLogin(page, email, password);
    return page;
  }

  async function flow(javaScriptEnabled: boolean): Promise<string[]> {
    const problems: string[] = [];
    const check = async (page: Page, name: string) => {
      if (javaScriptEnabled) problems.push(...(await axeProblems(page, name)));
    };
    const devEmail = uniqueEmail('dev');
    const devUser = await makeUser(t.app, { email: devEmail, email_verified: 1 });
    await createDeveloper(t.db, t.clock.now(), { email: devEmail });
    const endUser = await makeUser(t.app, { email: uniqueEmail('customer') });

    // Sign in to the console through the hosted login (the console is an app of the platform).
    const page = await (await context(javaScriptEnabled)).newPage();
    await page.goto(`${base}/console`);
    expect(new URL(page.url()).pathname).toBe('/login');
    await hostedLogin(page, devEmail, devUser.password);
    expect(new URL(page.url()).pathname).toBe('/console');
    await check(page, 'apps-empty');

    // Create a confidential app; a bad redirect URI first is shown at its field.
    await page.fill('input[name=name]', 'Bakery');
    await page.check('input[name=type][value=confidential]');
    await page.fill('textarea[name=redirect_uris]', 'ftp//nope');
    await click(page, 'create');
    expect(await page.getAttribute('textarea[name=redirect_uris]', 'aria-invalid')).toBe('true');
    if (javaScriptEnabled) expect(await page.evaluate(() => document.activeElement?.getAttribute('name'))).toBe('redirect_uris');
    await check(page, 'apps-error');
    await page.fill('textarea[name=redirect_uris]', `${base}/old-callback`);
    await click(page, 'create');
    const clientId = (await page.textContent('[data-field=client_id]'))!.trim();
    const firstSecret = (await page.textContent('[data-field=client_secret]'))!.trim();
    expect(clientId).toMatch(/^app_/);
    expect(firstSecret).toMatch(/^cs_/);
    await check(page, 'app-created');

    // Add a redirect URI.
    await page.fill('textarea[name=redirect_uris]', `${base}/old-callback\n${base}/app-callback`);
    await click(page, 'save');
    expect(await page.inputValue('textarea[name=redirect_uris]')).toBe(`${base}/old-callback\n${base}/app-callback`);
    expect(await page.textContent('[role=status]')).toContain('Saved');

    // Rotate the secret: a new one, shown once.
    await click(page, 'rotate_secret');
    const secondSecret = (await page.textContent('[data-field=client_secret]'))!.trim();
    expect(secondSecret).toMatch(/^cs_/);
    expect(secondSecret).not.toBe(firstSecret);
    await page.goto(`${base}/console/apps/${clientId}`);
    expect(await page.locator('[data-field=client_secret]').count()).toBe(0);
    await check(page, 'app-settings');

    // The end user signs in to the app (a code at the new redirect URI), so the developer can find them.
    const customer = await endUserSignIn(javaScriptEnabled, clientId, endUser.email, endUser.password);
    expect(customer.url()).toMatch(new RegExp(`^${base}/app-callback\\?code=`));
    await customer.context().close();

    await page.goto(`${base}/console/apps/${clientId}/users`);
    await page.fill('input[name=q]', endUser.email.slice(0, 12));
    await click(page, 'search');
    expect(await page.locator(`tr[data-user="${endUser.id}"]`).count()).toBe(1);
    // Blocking asks first: the button that blocks is inside the confirmation.
    await page.click(`tr[data-user="${endUser.id}"] details.confirm summary`);
    await click(page, 'block');
    expect(await page.textContent(`tr[data-user="${endUser.id}"]`)).toContain('blocked');
    await check(page, 'users');
    // The user's own page, from their address in the list.
    await Promise.all([page.waitForNavigation(), page.click(`tr[data-user="${endUser.id}"] a`)]);
    expect(await page.textContent('h2#user-heading')).toContain(endUser.email);
    await check(page, 'user');
    const refused = await endUserSignIn(javaScriptEnabled, clientId, endUser.email, endUser.password);
    // Refused after the right password: back at the app with access_denied, no code.
    const refusal = new URL(refused.url());
    expect(refusal.pathname).toBe('/app-callback');
    expect(refusal.searchParams.get('error')).toBe('access_denied');
    expect(refusal.searchParams.get('error_description')).toContain('blocked');
    expect(refusal.searchParams.has('code')).toBe(false);
    await refused.context().close();

    await page.goto(`${base}/console/apps/${clientId}/events`);
    expect(await page.textContent('table')).toContain('app.user_blocked');
    await check(page, 'events');

    // Webhooks: add an endpoint (its secret shown once), send a test event, read the delivery log.
    await page.goto(`${base}/console/apps/${clientId}/webhooks`);
    await check(page, 'webhooks-empty');
    await page.fill('input[name=url]', `${base}/no-receiver-here`);
    await page.check('input[name=event_types][value="user.blocked"]');
    await click(page, 'create');
    expect((await page.textContent('[data-field=webhook_secret]'))!.trim()).toMatch(/^whsec_/);
    await check(page, 'webhook-created');
    await click(page, 'test');
    expect(await page.textContent('[role=status]')).toContain('Test event queued');
    await t.app.webhookDeliverer.drain();
    await page.reload();
    expect(await page.locator('tr[data-delivery-id] [data-status-code]').textContent()).toBe('404');
    await check(page, 'webhook-log');

    // Publish a legal version: preview the sanitized HTML, publish, see it on the hosted page.
    await page.goto(`${base}/console/apps/${clientId}/legal`);
    await page.selectOption('select[name=docType]', 'terms');
    await page.selectOption('select[name=lang]', 'en');
    await page.fill('input[name=title]', 'Bakery terms');
    await page.fill('textarea[name=content]', '# Terms\n\nBread is **fresh**.<script>alert(1)</script>');
    await click(page, 'preview');
    expect(await page.innerHTML('[data-field=preview]')).toContain('<strong>fresh</strong>');
    expect(await page.innerHTML('[data-field=preview]')).not.toContain('<script');
    await check(page, 'legal-preview');
    await click(page, 'publish');
    expect(await page.textContent('[role=status]')).toContain('Published');
    const hosted = await (await context(javaScriptEnabled)).newPage();
    await hosted.goto(`${base}/legal/apps/${clientId}/terms?lang=en`);
    expect(await hosted.textContent('body')).toContain('Bread is fresh.');
    await hosted.context().close();
    await page.goto(`${base}/console/apps/${clientId}/legal`);
    expect(await page.getAttribute('svg.chart', 'aria-label')).toContain('1 in all');
    await check(page, 'legal');

    // Back-channel logout, DPoP and the password policy on the settings page; a bad URI shows its error there.
    await page.goto(`${base}/console/apps/${clientId}`);
    await page.fill('input[name=backchannel_logout_uri]', 'ftp://bakery.example/logout');
    await page.check('input[name=dpop_bound_access_tokens]');
    await page.fill('input[name=password_min_length]', '12');
    await click(page, 'save');
    expect(await page.textContent('#backchannel_logout_uri-error')).toContain('https');
    await check(page, 'settings-error');
    await page.fill('input[name=backchannel_logout_uri]', 'https://bakery.example/logout');
    await page.fill('input[name=password_max_age_days]', '90');
    await click(page, 'save');
    expect(await page.textContent('[role=status]')).toBeTruthy();
    expect(await page.inputValue('input[name=password_max_age_days]')).toBe('90');
    await check(page, 'settings-security');

    // Per-app mail: Reply-To, an override, and the preview of the rendered HTML part.
    await page.goto(`${base}/console/apps/${clientId}/mail`);
    await page.selectOption('select[name=kind]', 'password_reset');
    await page.selectOption('select[name=locale]', 'zh-CN');
    await Promise.all([page.waitForNavigation(), page.click('form[method=get] button[type=submit]')]);
    await page.fill('input[name=reply_to]', 'help@bakery.example');
    await page.fill('input[name=subject]', '重置您的面包店密码');
    await page.fill('textarea[name=intro]', '有人请求重置您在面包店的密码。');
    await click(page, 'save');
    const preview = page.frameLocator('iframe.mail-preview');
    expect(await preview.locator('body').textContent()).toContain('有人请求重置您在面包店的密码。');
    await check(page, 'mail');
    if (SHOTS) await page.locator('iframe.mail-preview').screenshot({ path: `${SHOTS}/mail-preview-frame.png` });

    await page.goto(`${base}/console/apps/${clientId}/integration`);
    expect(await page.textContent('pre')).toContain(clientId);
    await check(page, 'integration');
    await page.goto(`${base}/console/apps/${clientId}/delete`);
    await check(page, 'delete');
    await page.goto(`${base}/console/keys`);
    await page.fill('input[name=name]', 'Deploy');
    await click(page, 'create_key');
    expect(await page.textContent('[data-field=api_key]')).toMatch(/^dk_/);
    await check(page, 'keys');
    await page.goto(`${base}/console?ui_locales=zh-CN`);
    expect(await page.textContent('h1')).toBe('应用');
    await check(page, 'apps-zh');
    await click(page, 'logout');
    await check(page, 'signed-out');
    await page.context().close();

    if (javaScriptEnabled) {
      // The pages of a user who is no developer yet: the refusal, then an invitation.
      const plain = await makeUser(t.app, { email: uniqueEmail('plain') });
      const other = await (await context(true)).newPage();
      await other.goto(`${base}/console`);
      await hostedLogin(other, plain.email, plain.password);
      expect(await other.textContent('h1')).toBe('Not a developer account');
      await check(other, 'not-developer');
      const developer = await createDeveloper(t.db, t.clock.now(), { email: uniqueEmail('team') });
      const invitation = await createInvitation(t.db, t.config, t.clock.now(), developer.id, {});
      await other.goto(invitation.url);
      await check(other, 'invitation');
      await click(other, 'accept');
      expect(new URL(other.url()).pathname).toBe('/console');
      await other.context().close();

      // The operator view, entered with ADMIN_TOKEN.
      const operator = await (await context(true)).newPage();
      await operator.goto(`${base}/console/operator`);
      await check(operator, 'operator-login');
      await operator.fill('input[name=admin_token]', TEST_ADMIN_TOKEN);
      await click(operator, 'login');
      expect(await operator.locator(`tr[data-developer="${developer.id}"]`).count()).toBe(1);
      await check(operator, 'operator-developers');
      await operator.goto(`${base}/console/operator/users?q=${encodeURIComponent(plain.email)}`);
      expect(await operator.locator(`tr[data-user="${plain.id}"]`).count()).toBe(1);
      await check(operator, 'operator-users');
      await operator.context().close();
    }
    return problems;
  }

  it('works end to end with JavaScript, and every page passes axe (light, dark, desktop, 390 px)', async () => {
    expect(await flow(true)).toEqual([]);
  }, 120_000);

  it('works end to end without JavaScript', async () => {
    expect(await flow(false)).toEqual([]);
  }, 60_000);
});
