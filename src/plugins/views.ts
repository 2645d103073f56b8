import view from '@fastify/view';
import { Eta } from 'eta';
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { join, resolve } from 'node:path';
import { type AppError, describeError } from '../errors.js';
import { PROJECT_ROOT } from '../shared/paths.js';
import { refusedRedirectUri } from '../shared/redirect-uri-match.js';
import { chooseLocale, CONSOLE_LOCALES, directionOf, LOCALE_NAMES, LOCALES, Messages, type Locale, type Translate } from './i18n.js';

/** Where templates, locale files and static assets live (beside the code, whatever the working directory). */
export const VIEWS_DIR = join(PROJECT_ROOT, 'views');

declare module 'fastify' {
  interface FastifyInstance {
    messages: Messages;
  }
  interface FastifyRequest {
    /** The app whose branding the page shows (set by the hosted-pages scope for the sign-in in flight). */
    pageBrand?: PageBrand;
    /** What else may choose the page's language: the signed-in person's saved locale and the flow's app default. */
    localeHints?: { user: string | null; app: string | null };
  }
}

/** An app's look on the hosted pages: its name, its logo, and the stylesheet with its accent colour. */
export interface PageBrand {
  name: string;
  logoUrl: string | null;
  /** The logo for the dark colour scheme, when the app has one. */
  logoUrlDark: string | null;
  stylesheet: string | null;
}

/** Values every template receives. */
export interface PageLocals {
  t: Translate;
  locale: Locale;
  title: string;
  csrf?: string;
  [key: string]: unknown;
}

/** The cookie the language switcher sets: this browser's choice for someone not signed in. */
export const LOCALE_COOKIE = 'gh_locale';

/** The page's language, in the order of i18n.ts chooseLocale (docs/guides/hosted-pages.md). */
export function localeOf(request: FastifyRequest): Locale {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const body = (request.body ?? {}) as Record<string, unknown>;
  const ui = typeof query.ui_locales === 'string' ? query.ui_locales : typeof body.ui_locales === 'string' ? body.ui_locales : undefined;
  return chooseLocale({
    uiLocales: ui,
    userLocale: request.localeHints?.user,
    cookieLocale: request.cookies?.[LOCALE_COOKIE],
    acceptLanguage: request.headers['accept-language'],
    appDefault: request.localeHints?.app,
  });
}

/** The console's language: the page's when it is one of CONSOLE_LOCALES, else English (the console is not translated further). */
export function consoleLocaleOf(request: FastifyRequest): Locale {
  const locale = localeOf(request);
  return (CONSOLE_LOCALES as readonly Locale[]).includes(locale) ? locale : 'en';
}

/** The language switcher of every hosted page: a form that keeps the page (and its flow) and changes only the language. */
export interface LanguageSwitcher {
  current: Locale;
  /** The page to come back to: this request's path and query. */
  back: string;
  csrf?: string;
  choices: Array<{ locale: Locale; name: string }>;
}

/**
 * The page to come back to after switching: this path with the query values a page carries (client_id,
 * ui_locales, tokens, a time). A value that looks like a URL is left out: a page never echoes an address
 * someone put in its query (a `redirect_uri`, a `next=`), not even in a hidden field.
 */
export function switcherBack(url: string): string {
  const parsed = new URL(url, 'http://page.invalid');
  const kept = new URLSearchParams();
  for (const [name, value] of parsed.searchParams) {
    if (name === 'at' ? /^[0-9T:.Z+-]{1,40}$/.test(value) : !/[:/\\]/.test(value)) kept.append(name, value);
  }
  const query = kept.toString();
  return `${parsed.pathname}${query ? `?${query}` : ''}`;
}

function languageSwitcher(request: FastifyRequest, locale: Locale, csrf: unknown): LanguageSwitcher {
  return {
    current: locale,
    back: switcherBack(request.url),
    csrf: typeof csrf === 'string' ? csrf : request.browserSession?.csrf_token,
    choices: LOCALES.map((l) => ({ locale: l, name: LOCALE_NAMES[l] })),
  };
}

/** What a page may do beyond the hosted pages' policy. */
export interface PageOptions {
  /** Frame pages of this origin (the dev mailbox frames each mail). */
  frames?: boolean;
}

/** Security headers of every HTML response (docs/guides/hosted-pages.md#pages-sessions-and-headers, docs/security/checklist.md#redirect-uris-and-open-redirects, docs/security/checklist.md#sessions-cookies-and-csrf). */
export function setPageHeaders(reply: FastifyReply, https: boolean, options: PageOptions = {}): void {
  reply.header(
    'content-security-policy',
    // img-src https: lets a page show the logo an app registered (an https URL, validated on write).
    `default-src 'none'; style-src 'self'; img-src 'self' data: https:; script-src 'self'; connect-src 'self';${options.frames ? " frame-src 'self';" : ''} frame-ancestors 'none'; base-uri 'none'; object-src 'none'`,
  );
  reply.header('x-frame-options', 'DENY');
  reply.header('referrer-policy', 'no-referrer');
  reply.header('cache-control', 'no-store');
  if (https) reply.header('strict-transport-security', 'max-age=31536000; includeSubDomains');
}

/** Renders `views/pages/<name>.eta` (which uses the layout) in the request's locale; `titleKey` is a message key. */
export async function renderPage(
  request: FastifyRequest,
  reply: FastifyReply,
  name: string,
  locals: Omit<PageLocals, 't' | 'locale' | 'title'> & { titleKey: string },
  options: PageOptions = {},
): Promise<FastifyReply> {
  const locale = localeOf(request);
  const t = request.server.messages.translator(locale);
  setPageHeaders(reply, request.server.config.authUrl.startsWith('https://'), options);
  const html = await reply.viewAsync(`pages/${name}`, {
    ...locals,
    title: t(locals.titleKey),
    t,
    locale,
    dir: directionOf(locale),
    switcher: languageSwitcher(request, locale, locals.csrf),
    brand: request.pageBrand,
  });
  return reply.type('text/html; charset=utf-8').send(html);
}

/**
 * The hosted error page, used by the error handler for html-style routes: the exact reason outside
 * production (`describeError`, in the page's language), and a refused redirect_uri with the exact-match
 * rule (src/shared/redirect-uri-match.ts decides what is safe to show).
 */
export function renderHtmlError(
  request: FastifyRequest,
  reply: FastifyReply,
  error: AppError,
  /** The way back to the app the page was opened for, where the caller knows it is safe to show (pages/flow.ts appLink). */
  backTo?: { name: string; href: string },
): Promise<FastifyReply> {
  const production = request.server.config.production;
  const locale = localeOf(request);
  const t = request.server.messages.translator(locale);
  // The exact reasons are written in English and Simplified Chinese: another language shows the public
  // message translated, and outside production the English reason under it for the developer.
  const reasonLocale = locale === 'zh-CN' || locale === 'en' ? locale : undefined;
  const message = translatedErrorText(t, reasonLocale ? describeError(error, { production, locale: reasonLocale }) : error.publicMessage);
  const developerReason = !reasonLocale && !production && error.reason ? describeError(error, { production, locale: 'en' }) : undefined;
  return renderPage(request, reply, 'error', { titleKey: 'error.title', code: error.code, message, developerReason, production, refused: refusedRedirectUri(error), backTo });
}

/**
 * A public error message in the page's language. Messages are written in English where they are
 * thrown; the other languages translate them by their English text (`error.text.<message>`, the
 * gettext way), and one without a translation stays English.
 */
export function translatedErrorText(t: Translate, message: string): string {
  const key = `error.text.${message}`;
  const translated = t(key);
  return translated === key ? message : translated;
}

async function viewsPlugin(app: FastifyInstance) {
  const production = app.config.production;
  await app.register(view, {
    engine: { eta: new Eta({ views: VIEWS_DIR, autoEscape: true, cache: production, autoTrim: false }) },
    root: VIEWS_DIR,
    viewExt: 'eta',
    production,
  });
  app.decorate('messages', new Messages(resolve(VIEWS_DIR, 'locales')));
}

export default fp(viewsPlugin, { name: 'views', dependencies: ['db'] });
