import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Locale } from '../../src/plugins/i18n.js';
import { haveChromium, launchChromium } from '../helpers/browser.js';
import { startTour, walkTour } from '../helpers/page-tour.js';

/**
 * The key hosted pages in Spanish and in Arabic (right to left) pass axe-core in light and dark, at
 * 1280 and 390 px, like the English tour of a11y.sqlite.test.ts; Arabic pages are laid out right to
 * left and nothing overflows sideways on a phone (docs/guides/hosted-pages.md, "Languages").
 */

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const KEY_STOPS = ['login', 'register', 'register-errors', 'error', 'consent', 'account', 'mfa'];
const COMBINATIONS = [
  { scheme: 'light', width: 1280, height: 800 },
  { scheme: 'dark', width: 1280, height: 800 },
  { scheme: 'light', width: 390, height: 844 },
  { scheme: 'dark', width: 390, height: 844 },
] as const;

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[] }>;
}

async function seriousViolations(page: Page): Promise<Violation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async () => {
    const axe = (window as unknown as { axe: { run: (ctx: Document) => Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run(document)).violations;
  });
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

describe.skipIf(!haveChromium)('hosted pages in Spanish and Arabic pass axe-core; Arabic is right to left', () => {
  let browser: Browser;
  beforeAll(async () => {
    browser = await launchChromium();
  }, 60_000);
  afterAll(async () => browser?.close());

  for (const locale of ['es', 'ar'] as Locale[]) {
    it(`${locale}: sign-in, registration, error, consent, account and MFA pages`, async () => {
      const tour = await startTour(locale);
      const found: string[] = [];
      const seen: string[] = [];
      try {
        await walkTour(browser, tour, async (page, stop) => {
          if (!KEY_STOPS.includes(stop.name)) return;
          const { lang, dir, start } = await page.evaluate(() => {
            const text = document.createRange();
            text.selectNodeContents(document.querySelector('h1')!);
            const box = text.getBoundingClientRect();
            const card = document.querySelector('main')!.getBoundingClientRect();
            // Which side of the card the heading's text hugs: the right one for right-to-left text.
            return { lang: document.documentElement.lang, dir: document.documentElement.dir, start: box.left - card.left > card.right - box.right ? 'right' : 'left' };
          });
          seen.push(`${stop.name} ${lang} ${dir} ${start}`);
          for (const c of COMBINATIONS) {
            await page.emulateMedia({ colorScheme: c.scheme });
            await page.setViewportSize({ width: c.width, height: c.height });
            for (const v of await seriousViolations(page)) found.push(`${stop.name} (${c.scheme}, ${c.width}px): ${v.id} ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
            const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
            if (overflow > 0) found.push(`${stop.name} (${c.width}px): ${overflow}px sideways overflow`);
          }
        });
      } finally {
        await tour.t.close();
      }
      const expected = locale === 'ar' ? 'ar rtl right' : 'es ltr left';
      expect(seen).toEqual(KEY_STOPS.map((name) => `${name} ${expected}`));
      expect(found).toEqual([]);
    }, 240_000);
  }
});
