import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locale } from '../../src/plugins/i18n.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { startTour, walkTour } from '../helpers/page-tour.js';

/**
 * Screenshots of every hosted page (the tour of test/helpers/page-tour.ts) at desktop width and
 * 390 px, light and dark, in English, Simplified Chinese, Spanish and Arabic (or the locales listed in
 * SCREENSHOTS_LOCALES, comma-separated), written to SCREENSHOTS_DIR (default
 * `screenshots/`, git-ignored) as `<locale>/<stop>-<width>-<scheme>.png`. Only with SCREENSHOTS=1: it
 * is for people to look at, not a check, and costs a browser run. docs/guides/hosted-pages.md says how to produce them.
 */

const enabled = process.env.SCREENSHOTS === '1';
const DIR = process.env.SCREENSHOTS_DIR ?? 'screenshots';
const LOCALES = (process.env.SCREENSHOTS_LOCALES ?? 'en,zh-CN,es,ar').split(',').map((l) => l.trim()).filter(Boolean) as Locale[];
const SIZES = [
  { width: 1280, height: 800 },
  { width: 390, height: 844 },
] as const;

describe.skipIf(!enabled || !haveChromium)('screenshots of the hosted pages (SCREENSHOTS=1; skipped otherwise: they are for looking at, not a check)', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => browser?.close());

  for (const locale of LOCALES) {
    it(`every page in ${locale}`, async () => {
      const tour = await startTour(locale);
      const dir = join(DIR, locale);
      mkdirSync(dir, { recursive: true });
      let shots = 0;
      try {
        await walkTour(browser, tour, async (page, stop) => {
          for (const size of SIZES) {
            await page.setViewportSize(size);
            for (const scheme of ['light', 'dark'] as const) {
              await page.emulateMedia({ colorScheme: scheme });
              await page.screenshot({ path: join(dir, `${stop.name}-${size.width}-${scheme}.png`), fullPage: true });
              shots++;
            }
          }
        });
      } finally {
        await tour.t.close();
      }
      expect(shots).toBeGreaterThan(0);
    }, 180_000);
  }
});
