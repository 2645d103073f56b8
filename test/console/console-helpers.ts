import { insertTestUser } from '../helpers/factories.js';
import { Browser, csrfOf, PASSWORD, relative, uniqueEmail } from '../helpers/oauth-flows.js';
import type { TestApp } from '../helpers/app.js';
import { hashPassword } from '../../src/auth/passwords.js';
import { createDeveloper } from '../../src/admin/service.js';

/**
 * Follows a console sign-in through the hosted login (the browser is signed in to the hosted pages).
 * The console is the platform's own app and never asks for consent: a consent page ends the walk there.
 */
export async function consoleSignIn(browser: Browser, start = '/console'): Promise<string> {
  let res = await browser.get(start);
  for (let i = 0; i < 8; i++) {
    if (res.statusCode < 300 || res.statusCode >= 400) return `${res.statusCode} ${start}`;
    const path = relative(String(res.headers.location));
    res = await browser.get(path);
    if (!path.startsWith('/console/login') && !path.startsWith('/console/callback') && !path.startsWith('/oauth/authorize')) return `${res.statusCode} ${path}`;
  }
  throw new Error(`console sign-in did not finish: ${res.statusCode} ${String(res.headers.location)}`);
}

let passwordHash: string | undefined;

/** A user with a verified email and a developer of the same email (linked at the first console visit), signed in to the hosted pages. */
export async function developerBrowser(t: TestApp, email = uniqueEmail('dev')) {
  passwordHash ??= await hashPassword(PASSWORD);
  const user = await insertTestUser(t.db, { email, email_verified: 1, password_hash: passwordHash, password_changed_at: t.clock.now() }, t.clock.now());
  const developer = await createDeveloper(t.db, t.clock.now(), { email });
  const browser = new Browser(t.app);
  const login = await browser.login(email);
  if (login.statusCode !== 303) throw new Error(`login → ${login.statusCode}: ${login.body.slice(0, 300)}`);
  return { browser, user, developer, email };
}

/** A page's form (by its action) posted back with its CSRF token. */
export async function postForm(browser: Browser, pageUrl: string, action: string, form: Record<string, string>) {
  const page = await browser.get(pageUrl);
  if (page.statusCode !== 200) throw new Error(`GET ${pageUrl} → ${page.statusCode}`);
  return browser.post(action, { csrf: csrfOf(page.body), ...form });
}

/**
 * A form that makes something: its answer is 303 to `location`, whose page shows the new secret once
 * (`secretField`); a reload of that page shows it no more (and, being a GET, makes nothing again).
 */
export async function followShownOnce(browser: Browser, posted: { statusCode: number; headers: Record<string, unknown> }, location: string, secretField: string) {
  if (posted.statusCode !== 303 || posted.headers.location !== location) throw new Error(`expected 303 to ${location}, got ${posted.statusCode} ${String(posted.headers.location)}`);
  const page = await browser.get(location);
  const secret = new RegExp(`data-field="${secretField}">([^<]+)<`).exec(page.body)?.[1];
  if (page.statusCode !== 200 || !secret) throw new Error(`GET ${location} → ${page.statusCode} without the ${secretField} shown once`);
  const reloaded = await browser.get(location);
  if (reloaded.statusCode !== 200 || reloaded.body.includes(secret)) throw new Error(`a reload of ${location} showed the ${secretField} again`);
  return { page, secret };
}
