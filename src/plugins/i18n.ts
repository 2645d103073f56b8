import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

/**
 * Hosted-page languages (docs/guides/hosted-pages.md#pages-sessions-and-headers): English and Simplified Chinese, chosen by `ui_locales`, then
 * `Accept-Language`. Messages live in `views/locales/<locale>/*.json` (one file per page group, merged).
 */
export const LOCALES = ['en', 'zh-CN'] as const;
export type Locale = (typeof LOCALES)[number];

export type Translate = (key: string, params?: Record<string, string | number>) => string;

/** Picks the first supported locale from `ui_locales` (space-separated) then Accept-Language (by q). */
export function pickLocale(uiLocales: string | undefined, acceptLanguage: string | undefined): Locale {
  const candidates: string[] = [];
  if (uiLocales) candidates.push(...uiLocales.split(/\s+/).filter(Boolean));
  if (acceptLanguage) {
    const ranked = acceptLanguage
      .split(',')
      .map((part, index) => {
        const [tag, ...params] = part.trim().split(';');
        const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
        return { tag: (tag ?? '').trim(), q: q ? Number(q.slice(2)) || 0 : 1, index };
      })
      .filter((r) => r.tag && r.q > 0)
      .sort((a, b) => b.q - a.q || a.index - b.index);
    candidates.push(...ranked.map((r) => r.tag));
  }
  for (const candidate of candidates) {
    const lower = candidate.toLowerCase();
    if (lower === 'zh' || lower.startsWith('zh-cn') || lower.startsWith('zh-hans') || lower === 'zh-sg') return 'zh-CN';
    if (lower === 'en' || lower.startsWith('en-')) return 'en';
  }
  return 'en';
}

/** A date and time for people, in the page's language (in UTC: the server does not know the reader's zone). */
export function formatDateTime(locale: Locale, at: number | string): string {
  const date = typeof at === 'number' ? new Date(at * 1000) : new Date(at);
  return new Intl.DateTimeFormat(locale, { year: 'numeric', month: 'short', day: 'numeric', hour: '2-digit', minute: '2-digit', timeZone: 'UTC', timeZoneName: 'short' }).format(date);
}

export class Messages {
  private readonly catalogues = new Map<Locale, Record<string, string>>();

  constructor(localesDir: string) {
    for (const locale of LOCALES) {
      const dir = join(localesDir, locale);
      const merged: Record<string, string> = {};
      for (const file of readdirSync(dir).filter((f) => f.endsWith('.json')).sort()) {
        Object.assign(merged, JSON.parse(readFileSync(join(dir, file), 'utf8')) as Record<string, string>);
      }
      this.catalogues.set(locale, merged);
    }
  }

  /** A translator for one locale; falls back to English, then to the key itself. */
  translator(locale: Locale): Translate {
    const primary = this.catalogues.get(locale)!;
    const english = this.catalogues.get('en')!;
    return (key, params) => {
      const template = primary[key] ?? english[key] ?? key;
      return params ? template.replace(/\{(\w+)\}/g, (m, name: string) => (name in params ? String(params[name]) : m)) : template;
    };
  }
}
