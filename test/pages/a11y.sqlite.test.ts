import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { audit } from '../helpers/axe.js';
import { haveChromium, launchChromium, SCHEME_AND_WIDTHS } from '../helpers/browser.js';
import { startTour, walkTour, type Tour } from '../helpers/page-tour.js';

/**
 * axe-core on every hosted page (test/helpers/page-tour.ts: its table of stops), in light and dark
 * colour schemes, at desktop width and 390 px: no serious or critical violation. One Chromium, each
 * page visited once; the four combinations are checked on the same page (colour scheme and viewport
 * change, the page stays). SQLite only (`*.sqlite.test.ts`): the pages render the same whatever the
 * database, and this is the suite's most expensive browser test.
 */

/** Every stop of the tour and the path it must be on. */
const EXPECTED_PATHS: Array<[string, string]> = [
  ['login', '/login'],
  ['login-errors', '/login'],
  ['login-busy', '/login'],
  ['register', '/register'],
  ['register-errors', '/register'],
  ['magic-link', '/magic-link/request'],
  ['magic-link-sent', '/magic-link/request'],
  ['password-forgot', '/password/forgot'],
  ['password-reset', '/password/reset'],
  ['error', '/consent'],
  ['legal', '/legal/platform/terms'],
  ['mailbox', '/dev/mailbox'],
  ['login-branded', '/login'],
  ['consent', '/consent'],
  ['profile', '/profile'],
  ['profile-errors', '/profile'],
  ['account', '/account'],
  ['verify-email', '/verify-email'],
  ['totp-setup', '/account/mfa/totp'],
  ['logout', '/oauth/logout'],
  ['logout-done', '/oauth/logout'],
  ['mfa', '/mfa'],
];

describe.skipIf(!haveChromium)('hosted pages pass axe-core (light and dark, desktop and 390 px)', () => {
  let browser: Browser;
  let tour: Tour;

  beforeAll(async () => {
    [browser, tour] = await Promise.all([launchChromium(), startTour('en')]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await tour?.t.close();
  });

  it('every stop of the tour, every combination: zero serious or critical violations', async () => {
    const found: string[] = [];
    const visited: string[] = [];
    const checked = new Set<string>();
    await walkTour(browser, tour, async (page, stop) => {
      visited.push(`${stop.name} ${new URL(page.url()).pathname}`);
      for (const c of SCHEME_AND_WIDTHS) {
        await page.emulateMedia({ colorScheme: c.scheme });
        await page.setViewportSize({ width: c.width, height: c.height });
        const { serious, passed } = await audit(page);
        if (passed.includes('color-contrast')) checked.add(`${stop.name} ${c.scheme}`);
        for (const v of serious) {
          found.push(`${stop.name} (${c.scheme}, ${c.width}px) ${new URL(page.url()).pathname}: ${v.id} [${v.impact}] ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
        }
      }
    });
    // Each stop is the page it names (a flow that went astray would check the wrong page).
    expect(visited).toEqual(EXPECTED_PATHS.map(([name, path]) => `${name} ${path}`));
    // The contrast rule really ran on every page in both schemes.
    expect(checked.size).toBe(EXPECTED_PATHS.length * 2);
    expect(found).toEqual([]);
  }, 180_000);
});
