import type { Browser as PwBrowser, BrowserContext, Page } from 'playwright-core';
import { passwordHashingStats } from '../../src/auth/passwords.js';
import type { Locale } from '../../src/plugins/i18n.js';
import { buildTestApp, type TestApp } from './app.js';
import { eventually, holdThreadPool } from './concurrency.js';
import { adminHeaders } from './dev-api.js';
import { makeUser } from './factories.js';
import { authorizeUrl, Browser, makeClient, type TestClient } from './oauth-flows.js';
import { freePort } from './processes.js';

/**
 * A tour of every hosted page in real Chromium, for the accessibility and screenshot tests: a table of
 * stops, each one page (or page state) reached by driving the page before it, the way a user would.
 * To cover a new page (e.g. the console), add a stop to `STOPS`; the tests visit every stop.
 */

/** Where the branded app's logo seems to live; the tour answers it from inside the browser. */
export const LOGO_URL = 'https://logo.example/brand.svg';
const LOGO_SVG = '<svg xmlns="http://www.w3.org/2000/svg" width="160" height="40" viewBox="0 0 160 40"><rect width="40" height="40" rx="9" fill="#0f766e"/><circle cx="20" cy="20" r="9" fill="#fff"/><text x="50" y="27" font-family="sans-serif" font-size="18" font-weight="700" fill="#0f766e">Acme</text></svg>';

/** Which browser (cookie jar) a stop runs in: signed out, the user of the branded app, the user asked for a second factor. */
type Actor = 'visitor' | 'member' | 'second_factor';

export interface TourStop {
  name: string;
  actor: Actor;
  /** Brings the actor's page to this stop (from wherever the previous stop of that actor left it). */
  visit: (page: Page, tour: Tour) => Promise<void>;
}

export interface Tour {
  t: TestApp;
  base: string;
  locale: Locale;
  branded: TestClient;
  strict: TestClient;
  member: { email: string; password: string };
  second: { email: string; password: string };
  resetLink: string;
}

/** Submits a form without the browser's own checks, so the server's per-field errors show. */
async function submitUnchecked(page: Page, button: string): Promise<void> {
  await page.$$eval('form', (forms) => forms.forEach((f) => ((f as HTMLFormElement).noValidate = true)));
  await Promise.all([page.waitForNavigation(), page.click(button)]);
}

export async function signIn(page: Page, who: { email: string; password: string }): Promise<void> {
  await page.fill('input[name=email]', who.email);
  await page.fill('input[name=password]', who.password);
  await Promise.all([page.waitForNavigation(), page.click('button[name=action][value=login]')]);
}

/** The tour's bound on the wait for argon2 (PASSWORD_MAX_WAIT_MS), short so the busy stop is quick. */
const BUSY_BOUND_MS = 200;

/**
 * Signs in while password checks are over their bound: with libuv's threads held, logins of an unknown
 * address take the turns and one waits; the form's check waits behind it past the bound, and the form
 * comes back busy (503) with the email kept.
 */
async function signInWhileBusy(page: Page, tour: Tour): Promise<void> {
  await page.fill('input[name=email]', tour.member.email);
  await page.fill('input[name=password]', tour.member.password);
  const lineHolds = (n: number) =>
    eventually(async () => {
      const { running, waiting } = passwordHashingStats();
      return running + waiting >= n;
    });
  const release = holdThreadPool();
  const fillers: Array<Promise<unknown>> = [];
  try {
    while (passwordHashingStats().waiting === 0) {
      fillers.push(tour.t.app.inject({ method: 'POST', url: '/v1/auth/login', payload: { email: 'busy@example.com', password: 'not a password', client_id: tour.branded.app.id } }));
      await lineHolds(fillers.length);
    }
    const answered = Promise.all([page.waitForNavigation(), page.click('button[name=action][value=login]')]);
    await lineHolds(fillers.length + 1);
    // Joined the line before this point: after the pause it has waited past the bound.
    await new Promise((resolve) => setTimeout(resolve, BUSY_BOUND_MS + 100));
    await release();
    await answered;
  } finally {
    await release();
    await Promise.all(fillers);
  }
}

const go = async (page: Page, url: string) => {
  await page.goto(url);
};

export const STOPS: TourStop[] = [
  { name: 'login', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/login`) },
  { name: 'login-errors', actor: 'visitor', visit: (p) => submitUnchecked(p, 'button[name=action][value=login]') },
  { name: 'login-busy', actor: 'visitor', visit: signInWhileBusy },
  { name: 'register', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/register`) },
  { name: 'register-errors', actor: 'visitor', visit: (p) => submitUnchecked(p, 'button[name=action][value=register]') },
  { name: 'magic-link', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/magic-link/request`) },
  {
    name: 'magic-link-sent',
    actor: 'visitor',
    visit: async (p, r) => {
      await p.fill('input[name=email]', r.member.email);
      await Promise.all([p.waitForNavigation(), p.click('button[name=action][value=send_magic_link]')]);
    },
  },
  { name: 'password-forgot', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/password/forgot`) },
  { name: 'password-reset', actor: 'visitor', visit: (p, r) => go(p, r.resetLink) },
  { name: 'error', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/consent`) },
  { name: 'legal', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/legal/platform/terms`) },
  { name: 'mailbox', actor: 'visitor', visit: (p, r) => go(p, `${r.base}/dev/mailbox`) },
  { name: 'login-branded', actor: 'member', visit: (p, r) => go(p, `${r.base}${authorizeUrl(r.branded).url}`) },
  { name: 'consent', actor: 'member', visit: (p, r) => signIn(p, r.member) },
  { name: 'profile', actor: 'member', visit: (p) => Promise.all([p.waitForNavigation(), p.click('button[name=action][value=allow]')]).then(() => undefined) },
  {
    name: 'profile-errors',
    actor: 'member',
    visit: async (p) => {
      await p.fill('input[name=phone_number]', '12345');
      await submitUnchecked(p, 'button[name=action][value=save]');
    },
  },
  {
    name: 'account',
    actor: 'member',
    visit: async (p, r) => {
      await p.fill('input[name=phone_number]', '+14155550100');
      await Promise.all([p.waitForNavigation(), p.click('button[name=action][value=save]')]);
      await go(p, `${r.base}/account?client_id=${r.branded.app.id}`);
    },
  },
  { name: 'verify-email', actor: 'member', visit: (p, r) => go(p, `${r.base}/verify-email`) },
  {
    name: 'totp-setup',
    actor: 'member',
    visit: async (p, r) => {
      // Factors are enrolled only on a proven address: the member has verified it since the last stop.
      await r.t.db.updateTable('users').set({ email_verified: 1 }).where('email', '=', r.member.email).execute();
      await go(p, `${r.base}/account`);
      await Promise.all([p.waitForNavigation(), p.click('button[name=action][value=setup_totp]')]);
    },
  },
  { name: 'logout', actor: 'member', visit: (p, r) => go(p, `${r.base}/oauth/logout?client_id=${r.branded.app.id}`) },
  {
    name: 'logout-done',
    actor: 'member',
    visit: (p) => Promise.all([p.waitForNavigation(), p.click('button[name=action][value=logout]')]).then(() => undefined),
  },
  {
    name: 'mfa',
    actor: 'second_factor',
    visit: async (p, r) => {
      await go(p, `${r.base}${authorizeUrl(r.strict).url}`);
      await signIn(p, r.second);
    },
  },
];

/** A listening Gatehouse with the data the tour needs: a branded app, an app requiring a second factor, users, terms, a reset link. */
export async function startTour(locale: Locale, options: { withBusyStop?: boolean } = {}): Promise<Tour> {
  const port = await freePort();
  const base = `http://localhost:${port}`;
  // The short bound serves the busy stop; a tour without it keeps the default, so a loaded machine's slow sign-ins are not turned away.
  const bound: Record<string, string> = options.withBusyStop === false ? {} : { PASSWORD_MAX_WAIT_MS: String(BUSY_BOUND_MS) };
  const t = await buildTestApp({ env: { BASE_URL: base, IP_AUTH_PER_MINUTE: '10000', ...bound } });
  await t.app.listen({ port, host: '127.0.0.1' });
  const callback = `${base}/app/callback`;
  const branded = await makeClient(t, { name: 'Acme Notes', redirectUris: [callback], requiredFields: ['phone_number'], branding: { logoUrl: LOGO_URL, logoUrlDark: null, accentColor: '#0f766e' } });
  const strict = await makeClient(t, { name: 'Strict Bank', redirectUris: [callback], mfa: 'required' });
  const member = await makeUser(t.app, { email: 'ada@example.com', password: 'member passphrase 2024', name: 'Ada' });
  const second = await makeUser(t.app, { email: 'grace@example.com', password: 'second passphrase 2024', name: 'Grace', email_verified: 1 });
  await t.app.inject({
    method: 'PUT',
    url: `/v1/admin/legal/terms?lang=${locale}`,
    headers: adminHeaders,
    payload: { title: locale === 'zh-CN' ? '服务条款' : 'Terms of service', content: locale === 'zh-CN' ? '# 服务条款\n\n请友善待人。' : '# Terms of service\n\nBe kind to each other.' },
  });
  const resetLink = await mailedResetLink(t, member.email, locale);
  return { t, base, locale, branded, strict, member: { email: member.email, password: member.password }, second: { email: second.email, password: second.password }, resetLink };
}

/** Asks for a reset mail on the hosted page and reads its link from the dev mailbox. */
async function mailedResetLink(t: TestApp, email: string, locale: Locale): Promise<string> {
  await new Browser(t.app).submit(`/password/forgot?ui_locales=${locale}`, { email, action: 'reset' });
  for (let i = 0; i < 100; i++) {
    const items = (await t.app.inject({ method: 'GET', url: `/dev/mailbox?to=${encodeURIComponent(email)}`, headers: { accept: 'application/json' } })).json().items as Array<{ kind: string; text: string }>;
    const link = items.find((m) => m.kind === 'reset')?.text.match(/https?:\/\/\S+\/password\/reset\?token=\S+/)?.[0];
    if (link) return link;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  throw new Error('no reset mail');
}

/** Answers the branded app's logo from inside the browser context (the tests reach no network). */
export async function answerLogo(context: BrowserContext): Promise<void> {
  await context.route(LOGO_URL, (route) => route.fulfill({ contentType: 'image/svg+xml', body: LOGO_SVG }));
}

/**
 * Visits every stop in order, one browser context per actor (in the tour's language), and calls
 * `at` on each stop's page. The branded logo is answered inside the browser (no network).
 */
export async function walkTour(browser: PwBrowser, tour: Tour, at: (page: Page, stop: TourStop) => Promise<void>, stops: TourStop[] = STOPS): Promise<void> {
  const contexts = new Map<Actor, { context: BrowserContext; page: Page }>();
  try {
    for (const stop of stops) {
      let entry = contexts.get(stop.actor);
      if (!entry) {
        const context = await browser.newContext({ locale: tour.locale });
        await answerLogo(context);
        entry = { context, page: await context.newPage() };
        contexts.set(stop.actor, entry);
      }
      await stop.visit(entry.page, tour);
      await at(entry.page, stop);
    }
  } finally {
    for (const { context } of contexts.values()) await context.close();
  }
}
