import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { IntlMessageFormat } from 'intl-messageformat';

/**
 * Hosted-page languages (docs/guides/hosted-pages.md). Messages live in `views/locales/<locale>/*.json`
 * (one file per page group, merged) in ICU MessageFormat: `{name}` placeholders, `{n, plural, …}` and
 * `{x, select, …}` (intl-messageformat, compiled once per key and locale).
 */
export const LOCALES = ['en', 'zh-CN', 'zh-TW', 'es', 'fr', 'de', 'ja', 'ko', 'pt-BR', 'ar'] as const;
export type Locale = (typeof LOCALES)[number];

/** The console's languages: it stays English and Simplified Chinese. */
export const CONSOLE_LOCALES = ['en', 'zh-CN'] as const satisfies readonly Locale[];
/** Message files only the console reads; locales outside CONSOLE_LOCALES do not ship them. */
export const CONSOLE_FILES = ['console.json'] as const;

/** Each language's name in itself, for the language switcher. */
export const LOCALE_NAMES: Record<Locale, string> = {
  en: 'English',
  'zh-CN': '简体中文',
  'zh-TW': '繁體中文',
  es: 'Español',
  fr: 'Français',
  de: 'Deutsch',
  ja: '日本語',
  ko: '한국어',
  'pt-BR': 'Português (Brasil)',
  ar: 'العربية',
};

/** Languages written right to left. */
const RTL: ReadonlySet<Locale> = new Set<Locale>(['ar']);
export const directionOf = (locale: Locale): 'rtl' | 'ltr' => (RTL.has(locale) ? 'rtl' : 'ltr');

export const isLocale = (value: unknown): value is Locale => typeof value === 'string' && (LOCALES as readonly string[]).includes(value);

export type Translate = (key: string, params?: Record<string, string | number>) => string;

const TAG = /^[a-z]{2,3}(?:-[a-z0-9]{1,8})*$/;
const SIMPLE: Record<string, Locale> = { en: 'en', es: 'es', fr: 'fr', de: 'de', ja: 'ja', ko: 'ko', ar: 'ar', pt: 'pt-BR' };

/**
 * The supported locale a BCP 47 language tag asks for, or undefined. Chinese goes by script, then by
 * region (Hant, TW, HK, MO → zh-TW; Hans, CN, SG and plain zh → zh-CN); every other language by its
 * primary subtag (es-MX → es, pt-PT → pt-BR, en-GB → en).
 */
export function matchLocale(tag: string): Locale | undefined {
  const lower = tag.trim().toLowerCase().replaceAll('_', '-');
  if (!TAG.test(lower)) return undefined;
  const [language, ...rest] = lower.split('-');
  if (language === 'zh') {
    if (rest.includes('hant')) return 'zh-TW';
    if (rest.includes('hans')) return 'zh-CN';
    return rest.some((s) => s === 'tw' || s === 'hk' || s === 'mo') ? 'zh-TW' : 'zh-CN';
  }
  return SIMPLE[language!];
}

/** The tags of an Accept-Language header, best first (by q, then by order); q=0 and `*` left out. */
export function acceptedLanguages(header: string | undefined): string[] {
  if (!header) return [];
  return header
    .split(',')
    .slice(0, 50)
    .map((part, index) => {
      const [tag, ...params] = part.trim().split(';');
      const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
      const weight = q ? Number(q.slice(2)) : 1;
      return { tag: (tag ?? '').trim(), q: Number.isFinite(weight) ? weight : 0, index };
    })
    .filter((r) => r.tag && r.tag !== '*' && r.q > 0)
    .sort((a, b) => b.q - a.q || a.index - b.index)
    .map((r) => r.tag);
}

/** Where a page's language can come from, strongest first (see chooseLocale). */
export interface LocaleSources {
  /** `ui_locales` of the request (space-separated tags, the app's wish for this sign-in). */
  uiLocales?: string;
  /** The signed-in person's saved choice (users.locale). */
  userLocale?: string | null;
  /** The choice made with the language switcher in this browser (cookie), for someone not signed in. */
  cookieLocale?: string;
  acceptLanguage?: string;
  /** The app's default locale (apps.default_locale). */
  appDefault?: string | null;
}

/**
 * The page's language: the first supported tag of `ui_locales`, then the person's own choice (saved
 * on the account, else this browser's switcher cookie), then Accept-Language by q, then the app's
 * default locale, then English.
 */
export function chooseLocale(sources: LocaleSources): Locale {
  const candidates = [
    ...(sources.uiLocales ? sources.uiLocales.split(/\s+/).filter(Boolean).slice(0, 20) : []),
    sources.userLocale ?? '',
    sources.cookieLocale ?? '',
    ...acceptedLanguages(sources.acceptLanguage),
    sources.appDefault ?? '',
  ];
  for (const candidate of candidates) {
    const match = candidate ? matchLocale(candidate) : undefined;
    if (match) return match;
  }
  return 'en';
}

/** `ui_locales` then Accept-Language (where nothing else is known, such as a REST call that sends a mail). */
export function pickLocale(uiLocales: string | undefined, acceptLanguage: string | undefined): Locale {
  return chooseLocale({ uiLocales, acceptLanguage });
}

/** A date and time for people, in the page's language (in UTC: the server does not know the reader's zone). */
export function formatDateTime(locale: Locale, at: number | string): string {
  const date = typeof at === 'number' ? new Date(at * 1000) : new Date(at);
  return new Intl.DateTimeFormat(locale, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC', timeZoneName: 'short' }).format(date);
}

/** Reads `<dir>/<locale>/*.json` merged into one catalogue ({} when the locale has no directory yet). */
export function readCatalogue(localesDir: string, locale: string): Record<string, string> {
  const dir = join(localesDir, locale);
  const merged: Record<string, string> = {};
  if (!existsSync(dir)) return merged;
  for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
    Object.assign(merged, JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, string>);
  }
  return merged;
}

/** Compiles one message; `<b>` and the like stay text (templates escape them). */
export const compileMessage = (template: string, locale: Locale): IntlMessageFormat =>
  new IntlMessageFormat(template, locale, undefined, { ignoreTag: true });

/**
 * Text values set apart from right-to-left text (Unicode first-strong isolates, UAX #9), so an
 * address, an email or an app name keeps its own order ("127.0.0.x", not "x.127.0.0").
 */
function isolated(params: Record<string, string | number>): Record<string, string | number> {
  const out: Record<string, string | number> = {};
  for (const [name, value] of Object.entries(params)) out[name] = typeof value === 'string' ? `\u2068${value}\u2069` : value;
  return out;
}

export class Messages {
  private readonly catalogues = new Map<Locale, Record<string, string>>();
  private readonly compiled = new Map<string, IntlMessageFormat>();

  constructor(localesDir: string) {
    for (const locale of LOCALES) this.catalogues.set(locale, readCatalogue(localesDir, locale));
  }

  /** A translator for one locale; falls back to English, then to the key itself. */
  translator(locale: Locale): Translate {
    const primary = this.catalogues.get(locale)!;
    const english = this.catalogues.get('en')!;
    const isolate = directionOf(locale) === 'rtl';
    return (key, params) => {
      const own = primary[key];
      const template = own ?? english[key];
      if (template === undefined) return key;
      const formatLocale = own === undefined ? 'en' : locale;
      const cacheKey = `${formatLocale}\u0000${key}`;
      let message = this.compiled.get(cacheKey);
      if (!message) {
        message = compileMessage(template, formatLocale);
        this.compiled.set(cacheKey, message);
      }
      try {
        return String(message.format(isolate && params ? isolated(params) : (params ?? {})));
      } catch {
        // An argument the caller did not pass shows as `{name}` rather than breaking the page.
        return template.replace(/\{(\w+)\}/g, (m, name: string) => (params && name in params ? String(params[name]) : m));
      }
    };
  }
}
