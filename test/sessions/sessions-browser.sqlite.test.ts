import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { decodeJwt } from 'jose';
import type { Browser as PwBrowser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locale } from '../../src/plugins/i18n.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { axeInEveryCombination } from '../helpers/axe.js';
import { haveChromium, launchChromium, SCHEME_AND_WIDTHS } from '../helpers/browser.js';
import { makeUser } from '../helpers/factories.js';
import { type LogoutReceiver, startLogoutReceiver, validateLogoutTokenOf } from '../helpers/logout-tokens.js';
import { Browser, makeClient, refresh, type TestClient, userinfo } from '../helpers/oauth-flows.js';
import { freePort } from '../helpers/processes.js';

/**
 * The "Where you're signed in" section of /account in real Chromium (docs/account/sessions.md): the
 * list (this browser, another Chromium context, another browser, a phone, two apps), "Sign out" of one
 * browser and of one app, then "Sign out everywhere else", each confirmed by its message. What was
 * signed out is: the other context's page asks to sign in again, the apps' access and refresh tokens
 * fail, and each app gets a back-channel logout token (validated as an RP would,
 * test/helpers/logout-tokens.ts); this browser stays signed in. axe-core finds no serious or
 * critical violation in light and dark colour schemes at 1280 and 390 px, in English and Simplified
 * Chinese. With SCREENSHOTS=1 the states are written to SCREENSHOTS_DIR (default `screenshots/`) as
 * `<locale>/sessions-<state>-<width>-<scheme>.png`. SQLite only: the page renders the same whatever the
 * database.
 */

const SHOTS = process.env.SCREENSHOTS === '1';
const DIR = process.env.SCREENSHOTS_DIR ?? 'screenshots';

const WIN_FIREFOX = 'Mozilla/5.0 (Windows NT 10.0; Win64; x64; rv:121.0) Gecko/20100101 Firefox/121.0';
const IPHONE_SAFARI = 'Mozilla/5.0 (iPhone; CPU iPhone OS 17_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.1 Mobile/15E148 Safari/604.1';
const MAC_CHROME = 'Mozilla/5.0 (Macintosh; Intel Mac OS X 10_15_7) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36';
const LINUX_FIREFOX = 'Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0';

const TEXT = {
  en: { title: "Where you're signed in", thisBrowser: 'This browser', firefox: 'Firefox on Windows', safari: 'Safari on iOS', signOut: 'Sign out', others: 'Sign out everywhere else', outOf: (what: string) => `Signed out of ${what}.`, allDone: 'Signed out everywhere else.', noApps: 'You are not signed in to any app.' },
  'zh-CN': { title: '你在哪里登录', thisBrowser: '当前浏览器', firefox: 'Windows 上的 Firefox', safari: 'iOS 上的 Safari', signOut: '退出登录', others: '退出其他所有登录', outOf: (what: string) => `已退出 ${what}。`, allDone: '已退出其他所有登录。', noApps: '你没有登录任何应用。' },
} as const;

let t: TestApp;
let base: string;
let notes: TestClient;
let bank: TestClient;
let browser: PwBrowser;
let logouts: LogoutReceiver;

beforeAll(async () => {
  logouts = await startLogoutReceiver();
  const port = await freePort();
  base = `http://localhost:${port}`;
  [t, browser] = await Promise.all([buildTestApp({ env: { BASE_URL: base, IP_AUTH_PER_MINUTE: '10000', TRUST_PROXY: '127.0.0.1' } }), haveChromium ? launchChromium() : Promise.resolve(undefined as never)]);
  await t.app.listen({ port, host: '127.0.0.1' });
  notes = await makeClient(t, { name: 'Notes', backchannelLogout: { uri: `${logouts.base}/notes`, sessionRequired: true } });
  bank = await makeClient(t, { name: 'Acme Bank', backchannelLogout: { uri: `${logouts.base}/bank`, sessionRequired: true } });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
  await logouts?.close();
});

/** The logout tokens `client` received for `userId` (delivered by the background pass, or by this drain), validated by §2.6. */
async function logoutsAt(path: string, client: TestClient, userId: string): Promise<Array<{ sub?: string; sid?: string }>> {
  await t.app.logoutDeliverer.drain();
  await expect.poll(async () => (await t.db.selectFrom('logout_deliveries').select('id').where('user_id', '=', userId).where('app_id', '=', client.app.id).where('status', '=', 'pending').execute()).length).toBe(0);
  // Each run's person is another user: only theirs are validated (the earlier run's tokens are an hour old by now).
  const theirs = logouts.received.filter((r) => r.path === path && decodeJwt(r.token).sub === userId);
  return Promise.all(theirs.map((r) => validateLogoutTokenOf(t, r.token, client.app.id)));
}

describe.skipIf(!haveChromium)('/account sessions in Chromium', () => {
  for (const locale of ['en', 'zh-CN'] as Locale[]) {
    it(`lists, signs out one browser, one app, then everywhere else; axe-clean in both schemes at 1280 and 390 px (${locale})`, async () => {
      const text = TEXT[locale as keyof typeof TEXT];
      const person = await makeUser(t.app, { email: `sessions.${locale}@example.com`, password: 'sessions passphrase 2026', name: 'Ada', email_verified: 1 });
      // Elsewhere: a Windows desktop and an iPhone signed in to the pages, and two apps.
      const desktop = new Browser(t.app);
      expect((await desktop.login(person.email, person.password)).statusCode).toBe(303);
      await t.db.updateTable('browser_sessions').set({ user_agent: WIN_FIREFOX, ip_area: '198.51.100.x' }).where('user_id', '=', person.id).execute();
      const phone = new Browser(t.app);
      expect((await phone.login(person.email, person.password)).statusCode).toBe(303);
      await t.db.updateTable('browser_sessions').set({ user_agent: IPHONE_SAFARI, ip_area: '2001:db8:1234::/48' }).where('user_id', '=', person.id).where('user_agent', '!=', WIN_FIREFOX).execute();
      t.clock.advance(3600);
      const onPhone = await t.app.tokens.issueTokens(t.db, { app: notes.app, user: person, scope: 'openid', authTime: t.clock.now(), amr: ['pwd'], device: { userAgent: IPHONE_SAFARI, ipArea: '2001:db8:1234::/48' } });
      const onMac = await t.app.tokens.issueTokens(t.db, { app: bank.app, user: person, scope: 'openid', authTime: t.clock.now(), amr: ['pwd'], device: { userAgent: MAC_CHROME, ipArea: '203.0.113.x' } });

      // Another real browser: its own Chromium context (its own cookies), signed in to /account.
      const otherContext = await browser.newContext({ locale, userAgent: LINUX_FIREFOX });
      const other = await otherContext.newPage();
      await other.goto(`${base}/account`);
      await other.fill('input[name=email]', person.email);
      await other.fill('input[name=password]', person.password);
      await Promise.all([other.waitForNavigation(), other.click('button[name=action][value=login]')]);
      expect(await other.locator('[data-field=email]').count()).toBe(1);

      const context = await browser.newContext({ locale });
      const page = await context.newPage();
      const dir = join(DIR, locale);
      if (SHOTS) mkdirSync(dir, { recursive: true });
      const found: string[] = [];
      /** axe in every combination (and screenshots with SCREENSHOTS=1), the page as it is. */
      const check = async (state: string) => {
        await page.locator('#sessions').scrollIntoViewIfNeeded();
        found.push(...(await axeInEveryCombination(page, state)));
        if (!SHOTS) return;
        for (const c of SCHEME_AND_WIDTHS) {
          await page.emulateMedia({ colorScheme: c.scheme });
          await page.setViewportSize({ width: c.width, height: c.height });
          await page.screenshot({ path: join(dir, `sessions-${state}-${c.width}-${c.scheme}.png`), fullPage: true });
          await page.locator('section[aria-labelledby=sessions]').screenshot({ path: join(dir, `sessions-${state}-${c.width}-${c.scheme}-section.png`) });
        }
        await page.setViewportSize({ width: 1280, height: 800 });
      };
      const section = page.locator('section[aria-labelledby=sessions]');
      const entry = (label: string) => section.locator('form.item', { hasText: label });

      try {
        await page.goto(`${base}/account`);
        await page.fill('input[name=email]', person.email);
        await page.fill('input[name=password]', person.password);
        await Promise.all([page.waitForNavigation(), page.click('button[name=action][value=login]')]);

        await expect.poll(() => section.locator('h2').textContent()).toBe(text.title);
        expect(await section.locator('form.item').count()).toBe(6);
        const mine = section.locator('form.item[data-current]');
        expect(await mine.textContent()).toContain(text.thisBrowser);
        expect(await mine.textContent()).toContain('127.0.0.x');
        expect(await entry(text.firefox).textContent()).toContain('198.51.100.x');
        expect(await entry('Notes').textContent()).toContain(text.safari);
        expect(await entry('Acme Bank').textContent()).toContain('203.0.113.x');
        // This browser is listed first, and the most recently used app first (both just signed in; Acme Bank was created last).
        expect(await section.locator('form.item').first().getAttribute('data-current')).not.toBeNull();
        await check('list');

        // One browser.
        await Promise.all([page.waitForNavigation(), entry(text.firefox).locator('button').click()]);
        expect(await page.locator('p.notice[role=status]').textContent()).toBe(text.outOf(text.firefox));
        expect(await entry(text.firefox).count()).toBe(0);
        expect((await desktop.get('/account')).body).not.toContain('data-field="email"');
        await check('signed-out-one');

        // One app.
        await Promise.all([page.waitForNavigation(), entry('Notes').locator('button').click()]);
        expect(await page.locator('p.notice[role=status]').textContent()).toBe(text.outOf('Notes'));
        expect((await userinfo(t.app, onPhone.response.access_token)).statusCode).toBe(401);
        expect((await refresh(t.app, notes, onPhone.response.refresh_token)).statusCode).toBe(400);
        expect(await logoutsAt('/notes', notes, person.id)).toHaveLength(1);
        expect((await userinfo(t.app, onMac.response.access_token)).statusCode).toBe(200);
        expect(await logoutsAt('/bank', bank, person.id)).toEqual([]);

        // Everywhere else.
        await Promise.all([page.waitForNavigation(), section.locator('button[value=others]').click()]);
        expect(await page.locator('p.notice[role=status]').textContent()).toBe(text.allDone);
        expect(await section.locator('form.item').count()).toBe(1);
        expect(await section.textContent()).toContain(text.noApps);
        expect((await phone.get('/account')).body).not.toContain('data-field="email"');
        expect((await userinfo(t.app, onMac.response.access_token)).statusCode).toBe(401);
        expect((await refresh(t.app, bank, onMac.response.refresh_token)).statusCode).toBe(400);
        expect(await logoutsAt('/bank', bank, person.id)).toHaveLength(1);
        expect(await logoutsAt('/notes', notes, person.id)).toHaveLength(1);
        await other.reload();
        expect(await other.locator('[data-field=email]').count()).toBe(0);
        expect(await other.locator('input[name=password]').count()).toBe(1);
        // This browser stays signed in, on a fresh load too.
        await page.reload();
        expect(await page.locator('[data-field=email]').count()).toBe(1);
        await check('everywhere-else');
      } finally {
        await context.close();
        await otherContext.close();
      }
      expect(found).toEqual([]);
    }, 420_000);
  }
});
