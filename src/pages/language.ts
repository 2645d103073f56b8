import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { isLocale, LOCALES } from '../plugins/i18n.js';
import { LOCALE_COOKIE } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { setUserLocale } from '../storage/repos/users.js';

/** A year: the choice outlives sessions, and a person can change it on any page. */
const COOKIE_SECONDS = 365 * 24 * 3600;

const LanguageForm = z.object({
  csrf: z.string().max(200).optional(),
  locale: z.enum(LOCALES),
  back: z.string().max(4096).optional(),
});

/**
 * Where the switcher sends the person back to: the same page of our own site, with `ui_locales` (which
 * outranks every other choice) rewritten to the new language so the flow in flight goes on in it.
 * Anything that is not a path on this site (`//evil.example`, `/\evil`, a URL) becomes the account page.
 */
export function backAfterSwitch(back: string | undefined, locale: string, authUrl: string): string {
  const origin = new URL(authUrl).origin;
  if (!back || !back.startsWith('/') || back.startsWith('//') || back.startsWith('/\\')) return '/account';
  let url: URL;
  try {
    url = new URL(back, origin);
  } catch {
    return '/account';
  }
  if (url.origin !== origin) return '/account';
  if (url.searchParams.has('ui_locales')) url.searchParams.set('ui_locales', locale);
  return `${url.pathname}${url.search}`;
}

/**
 * `POST /language`: the language switcher on every hosted page (docs/guides/hosted-pages.md). Sets this
 * browser's choice (cookie) and, for someone signed in, their saved locale, then goes back to the page.
 * A signed-in browser must send its CSRF token; a browser without a session has nothing to protect but
 * its own cookie.
 */
export default async function languagePages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/language',
    {
      schema: { body: LanguageForm },
      config: { csrf: (request) => request.browserSession !== null },
    },
    async (request, reply) => {
      const { locale, back } = request.body;
      if (!isLocale(locale)) throw new AppError('invalid_request');
      reply.setCookie(LOCALE_COOKIE, locale, {
        path: '/',
        httpOnly: true,
        sameSite: 'lax',
        secure: app.config.authUrl.startsWith('https://'),
        maxAge: COOKIE_SECONDS,
      });
      const userId = request.browserSession?.user_id;
      if (userId) await setUserLocale(app.db, userId, locale);
      return reply.redirect(backAfterSwitch(back, locale, app.config.authUrl), 303);
    },
  );
}
