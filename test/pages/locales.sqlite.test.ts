import { mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LOCALES, type Locale } from '../../src/plugins/i18n.js';
import { haveChromium, launchChromium, SCHEME_AND_WIDTHS } from '../helpers/browser.js';
import { insertTestUser } from '../helpers/factories.js';
import { authorizeUrl } from '../helpers/oauth-flows.js';
import { answerLogo, signIn, startTour, type Tour } from '../helpers/page-tour.js';

/**
 * The key hosted pages — sign-in, registration, an error, consent, account and MFA — in each of the ten
 * languages (docs/guides/hosted-pages.md#languages), at 1280 and 390 px, light and dark: axe-core finds
 * no serious or critical violation, nothing overflows sideways, each page is in its language and
 * direction, and Arabic is mirrored (its heading hugs the right of the card, the language switcher's
 * label sits right of its list). A screenshot of each is written to SCREENSHOTS_DIR (default
 * `screenshots/`, git-ignored) as `<locale>/<page>-<width>-<scheme>.png`, for people to look at.
 * One Chromium and one server for all; each language has one page (its own browser context and users).
 */

const AXE_SOURCE = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8');
const DIR = process.env.SCREENSHOTS_DIR ?? 'screenshots';
/**
 * The DOM is the same in every combination; only what CSS decides changes with the colour scheme and
 * the width, so after the first combination's full run, axe runs the rules that read the rendering.
 */
const RENDERING_RULES = ['color-contrast', 'target-size', 'scrollable-region-focusable', 'link-in-text-block', 'meta-viewport', 'css-orientation-lock'];

interface Violation {
  id: string;
  impact: string | null;
  help: string;
  nodes: Array<{ target: string[] }>;
}

async function seriousViolations(page: Page, rules?: string[]): Promise<Violation[]> {
  if (!(await page.evaluate(() => 'axe' in window))) await page.evaluate(AXE_SOURCE);
  const violations = await page.evaluate(async (only) => {
    const axe = (window as unknown as { axe: { run: (ctx: Document, options: object) => Promise<{ violations: Violation[] }> } }).axe;
    return (await axe.run(document, only ? { runOnly: { type: 'rule', values: only } } : {})).violations;
  }, rules ?? null);
  return violations.filter((v) => v.impact === 'serious' || v.impact === 'critical');
}

/** The page's language and direction, and which way its layout runs, read from rendered boxes. */
function layoutOf(page: Page): Promise<string> {
  return page.evaluate(() => {
    const text = document.createRange();
    text.selectNodeContents(document.querySelector('h1')!);
    const heading = text.getBoundingClientRect();
    const card = document.querySelector('main')!.getBoundingClientRect();
    // Which side of the card the heading's text hugs: the right one for right-to-left text.
    const hugs = heading.left - card.left > card.right - heading.right ? 'right' : 'left';
    const label = document.querySelector('form.language label')!.getBoundingClientRect();
    const list = document.querySelector('form.language select')!.getBoundingClientRect();
    // The switcher's label comes first in reading order: left of its list, or right of it in Arabic.
    const labelSide = label.left < list.left ? 'label-left' : 'label-right';
    return `${document.documentElement.lang} ${document.documentElement.dir} ${hugs} ${labelSide}`;
  });
}

/** Runs at most `n` tasks at once, the others waiting their turn. */
function limiter(n: number): <T>(task: () => Promise<T>) => Promise<T> {
  let running = 0;
  const waiting: Array<() => void> = [];
  return async (task) => {
    if (running >= n) await new Promise<void>((resolve) => waiting.push(resolve));
    else running++;
    try {
      return await task();
    } finally {
      const next = waiting.shift();
      if (next) next();
      else running--;
    }
  };
}

interface Stop {
  name: string;
  path: string;
  visit: (page: Page, users: { member: Credentials; second: Credentials }) => Promise<void>;
}
type Credentials = { email: string; password: string };

const click = (page: Page, selector: string) => Promise.all([page.waitForNavigation(), page.click(selector)]).then(() => undefined);

function stops(tour: Tour): Stop[] {
  const go = (page: Page, path: string) => page.goto(`${tour.base}${path}`).then(() => undefined);
  return [
    { name: 'login', path: '/login', visit: (p) => go(p, '/login') },
    { name: 'register', path: '/register', visit: (p) => go(p, '/register') },
    { name: 'error', path: '/consent', visit: (p) => go(p, '/consent') },
    {
      name: 'consent',
      path: '/consent',
      visit: async (p, { member }) => {
        await go(p, authorizeUrl(tour.branded).url);
        await signIn(p, member);
      },
    },
    {
      name: 'account',
      path: '/account',
      visit: async (p) => {
        await click(p, 'button[name=action][value=allow]');
        await p.fill('input[name=phone_number]', '+14155550100');
        await click(p, 'button[name=action][value=save]');
        await go(p, `/account?client_id=${tour.branded.app.id}`);
      },
    },
    {
      name: 'mfa',
      path: '/mfa',
      visit: async (p, { second }) => {
        await p.context().clearCookies();
        await go(p, authorizeUrl(tour.strict).url);
        await signIn(p, second);
      },
    },
  ];
}

describe.skipIf(!haveChromium)('the key hosted pages in all ten languages: axe-core clean, Arabic right to left, screenshots', () => {
  let browser: Browser;
  let tour: Tour;
  beforeAll(async () => {
    [browser, tour] = await Promise.all([launchChromium(), startTour('en', { withBusyStop: false })]);
  }, 60_000);
  afterAll(async () => {
    await browser?.close();
    await tour?.t.close();
  });

  /** A fresh user per language (consent and profile are asked once per user), with the tour user's password hash. */
  async function likeUser(model: Credentials, locale: Locale): Promise<Credentials> {
    const row = await tour.t.db.selectFrom('users').selectAll().where('email', '=', model.email).executeTakeFirstOrThrow();
    const email = model.email.replace('@', `.${locale.toLowerCase()}@`);
    await insertTestUser(tour.t.db, { email, password_hash: row.password_hash, name: row.name, email_verified: row.email_verified, password_changed_at: row.password_changed_at });
    return { email, password: model.password };
  }

  // Each language has its own browser context and users, so two run side by side (more only crowd two cores).
  const inTurn = limiter(2);
  for (const locale of LOCALES) {
    it.concurrent(`${locale}: sign-in, registration, error, consent, account and MFA`, () => inTurn(async () => {
      const users = { member: await likeUser(tour.member, locale), second: await likeUser(tour.second, locale) };
      const dir = join(DIR, locale);
      mkdirSync(dir, { recursive: true });
      const context = await browser.newContext({ locale });
      const found: string[] = [];
      const seen: string[] = [];
      try {
        await answerLogo(context);
        const page = await context.newPage();
        // A step that cannot happen fails in seconds with its selector, not at the test's timeout.
        page.setDefaultTimeout(20_000);
        for (const stop of stops(tour)) {
          await stop.visit(page, users);
          seen.push(`${stop.name} ${new URL(page.url()).pathname} ${await layoutOf(page)}`);
          for (const [i, c] of SCHEME_AND_WIDTHS.entries()) {
            await page.emulateMedia({ colorScheme: c.scheme });
            await page.setViewportSize({ width: c.width, height: c.height });
            for (const v of await seriousViolations(page, i === 0 ? undefined : RENDERING_RULES)) {
              found.push(`${stop.name} (${c.scheme}, ${c.width}px): ${v.id} ${v.help} — ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`);
            }
            const overflow = await page.evaluate(() => document.documentElement.scrollWidth - document.documentElement.clientWidth);
            if (overflow > 0) found.push(`${stop.name} (${c.width}px): ${overflow}px sideways overflow`);
            await page.screenshot({ path: join(dir, `${stop.name}-${c.width}-${c.scheme}.png`), fullPage: true });
          }
        }
      } finally {
        await context.close();
      }
      const expected = locale === 'ar' ? 'ar rtl right label-right' : `${locale} ltr left label-left`;
      expect(seen).toEqual(stops(tour).map((s) => `${s.name} ${s.path} ${expected}`));
      expect(found).toEqual([]);
    }), 300_000);
  }
});
