import { readFileSync } from 'node:fs';
import type { Browser as PwBrowser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locale } from '../../src/plugins/i18n.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { axeInEveryCombination } from '../helpers/axe.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { makeUser } from '../helpers/factories.js';
import { freePort } from '../helpers/processes.js';

/**
 * Email change and "Download my data" on /account in real Chromium (docs/account/email-change.md,
 * docs/account/data-export.md): the person asks for a new address with the current password, the page
 * says a code was sent, the mailed code moves the account, and the download is one JSON file of the
 * account at its new address with no password or hash in it. axe-core finds no serious or critical
 * violation in light and dark colour schemes at 1280 and 390 px, in English and Simplified Chinese.
 * SQLite only: the page renders the same whatever the database.
 */

const TEXT = {
  en: { pending: 'We sent a 6-digit code', done: 'Your email address is now', download: 'Download my data' },
  'zh-CN': { pending: '6 位验证码', done: '你的邮箱地址现在是', download: '下载我的数据' },
} as const;

let t: TestApp;
let base: string;
let browser: PwBrowser;

beforeAll(async () => {
  const port = await freePort();
  base = `http://localhost:${port}`;
  [t, browser] = await Promise.all([
    buildTestApp({ env: { BASE_URL: base, IP_AUTH_PER_MINUTE: '10000', MAIL_INTERVAL_SECONDS: '0' } }),
    haveChromium ? launchChromium() : Promise.resolve(undefined as never),
  ]);
  await t.app.listen({ port, host: '127.0.0.1' });
}, 60_000);

afterAll(async () => {
  await browser?.close();
  await t?.close();
});

/** The 6-digit code mailed to `to`, read from the dev mailbox once the mail is there. */
async function mailedCode(to: string): Promise<string> {
  let code: string | undefined;
  await expect
    .poll(async () => {
      const items = (await t.app.inject({ url: `/dev/mailbox?to=${encodeURIComponent(to)}`, headers: { accept: 'application/json' } })).json().items as Array<{ kind: string; text: string }>;
      code = items.find((m) => m.kind === 'verify')?.text.match(/\b(\d{6})\b/)?.[1];
      return code;
    })
    .toBeDefined();
  return code!;
}

describe.skipIf(!haveChromium)('/account email change and data download in Chromium', () => {
  for (const locale of ['en', 'zh-CN'] as Locale[]) {
    it(`moves the account to a new address with the mailed code, then downloads the data; axe-clean (${locale})`, async () => {
      const text = TEXT[locale as keyof typeof TEXT];
      const person = await makeUser(t.app, { email: `before.${locale.toLowerCase()}@example.com`, password: 'email change passphrase 2026', name: 'Ada', email_verified: 1 });
      const to = `after.${locale.toLowerCase()}@example.com`;
      const context = await browser.newContext({ locale, acceptDownloads: true });
      const page = await context.newPage();
      const found: string[] = [];
      try {
        await page.goto(`${base}/account`);
        await page.fill('input[name=email]', person.email);
        await page.fill('input[name=password]', person.password);
        await Promise.all([page.waitForNavigation(), page.click('button[name=action][value=login]')]);
        expect(await page.locator('[data-field=email]').textContent()).toBe(person.email);
        found.push(...(await axeInEveryCombination(page, 'account')));

        // Ask: the new address and the current password.
        await page.fill('input[name=new_email]', to);
        await page.fill('#email-current-password', person.password);
        await Promise.all([page.waitForNavigation(), page.click('button[name=action][value=request]')]);
        const pending = page.locator('[data-email-change-pending]');
        expect(await pending.textContent()).toContain(text.pending);
        expect(await pending.textContent()).toContain(to);
        expect(await page.locator('[data-field=email]').textContent()).toBe(person.email);
        found.push(...(await axeInEveryCombination(page, 'email-pending')));

        // Confirm with the mailed code.
        await page.fill('input[name=email_code]', await mailedCode(to));
        await Promise.all([page.waitForNavigation(), page.click('button[name=action][value=confirm]')]);
        expect(await page.locator('p.notice[role=status]').first().textContent()).toContain(`${text.done} ${to}`);
        expect(await page.locator('[data-field=email]').textContent()).toBe(to);
        expect(await t.db.selectFrom('users').select(['email', 'email_verified']).where('id', '=', person.id).executeTakeFirstOrThrow()).toEqual({ email: to, email_verified: 1 });
        found.push(...(await axeInEveryCombination(page, 'email-changed')));

        // Download my data: one JSON file, the account at its new address, nothing secret.
        const link = page.locator('a[data-export]');
        expect(await link.textContent()).toBe(text.download);
        const [download] = await Promise.all([page.waitForEvent('download'), link.click()]);
        expect(download.suggestedFilename()).toMatch(/^gatehouse-export-\d{4}-\d{2}-\d{2}\.json$/);
        const body = readFileSync((await download.path())!, 'utf8');
        const doc = JSON.parse(body) as { format: string; account: { email: string; email_verified: boolean } };
        expect(doc.format).toBe('gatehouse.account-export/1');
        expect(doc.account).toMatchObject({ email: to, email_verified: true });
        expect(body).not.toContain(person.password);
        expect(body).not.toMatch(/\$argon2|password_hash|secret/);
      } finally {
        await context.close();
      }
      expect(found).toEqual([]);
    }, 240_000);
  }
});
