import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, TYPE, type MessageFormatElement } from '@formatjs/icu-messageformat-parser';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CONSOLE_FILES, CONSOLE_LOCALES, compileMessage, LOCALES, type Locale } from '../../src/plugins/i18n.js';
import { VIEWS_DIR } from '../../src/plugins/views.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { authorizeUrl, Browser, makeClient } from '../helpers/oauth-flows.js';

/**
 * Every locale has every message of English and nothing else, with the same placeholders and ICU
 * arguments, and the hosted pages rendered in it show no English catalogue text
 * (docs/guides/hosted-pages.md, "Adding a language"). The locales are LOCALES and every directory
 * under views/locales: a locale in LOCALES without a directory fails, and so does a directory nobody
 * listed. Only CONSOLE_LOCALES ship the console's files.
 */

const LOCALES_DIR = join(VIEWS_DIR, 'locales');
const directories = readdirSync(LOCALES_DIR, { withFileTypes: true }).filter((d) => d.isDirectory()).map((d) => d.name);
const ALL = [...new Set<string>([...LOCALES, ...directories])].sort();
const OTHERS = ALL.filter((l) => l !== 'en');

const readJson = (locale: string, file: string): Record<string, string> => JSON.parse(readFileSync(join(LOCALES_DIR, locale, file), 'utf8')) as Record<string, string>;
const englishFiles = readdirSync(join(LOCALES_DIR, 'en')).filter((f) => f.endsWith('.json')).sort();
const filesFor = (locale: string) => ((CONSOLE_LOCALES as readonly string[]).includes(locale) ? englishFiles : englishFiles.filter((f) => !(CONSOLE_FILES as readonly string[]).includes(f)));

/** The arguments a message uses (`name`, `n:plural`, …), nested ones included. */
function argumentsOf(elements: MessageFormatElement[], into = new Set<string>()): Set<string> {
  for (const e of elements) {
    if (e.type === TYPE.argument) into.add(e.value);
    else if (e.type === TYPE.number || e.type === TYPE.date || e.type === TYPE.time) into.add(`${e.value}:${TYPE[e.type]}`);
    else if (e.type === TYPE.plural || e.type === TYPE.select) {
      into.add(`${e.value}:${e.type === TYPE.select ? 'select' : 'plural'}`);
      for (const option of Object.values(e.options)) argumentsOf(option.value, into);
    } else if (e.type === TYPE.tag) argumentsOf(e.children, into);
  }
  return into;
}

/** A plural's or select's argument counts as its plain name too: zh/ja/ko say `{n}` where English says `{n, plural, …}`. */
const names = (args: Set<string>) => [...new Set([...args].map((a) => a.split(':')[0]!))].sort();

describe('locale catalogues', () => {
  it('LOCALES and the locale directories are the same set', () => {
    expect({ missing: LOCALES.filter((l) => !directories.includes(l)), unlisted: directories.filter((d) => !(LOCALES as readonly string[]).includes(d)) }).toEqual({ missing: [], unlisted: [] });
  });

  it.each(OTHERS)('%s has exactly the files and keys of en, with the same arguments', (locale) => {
    expect(existsSync(join(LOCALES_DIR, locale)), `views/locales/${locale}/ is missing`).toBe(true);
    const files = readdirSync(join(LOCALES_DIR, locale)).filter((f) => f.endsWith('.json')).sort();
    expect(files).toEqual(filesFor(locale));
    const problems: string[] = [];
    for (const file of files) {
      const en = readJson('en', file);
      const own = readJson(locale, file);
      for (const key of Object.keys(en)) if (!(key in own)) problems.push(`${file}: missing ${key}`);
      for (const key of Object.keys(own)) if (!(key in en)) problems.push(`${file}: extra ${key}`);
      for (const [key, value] of Object.entries(own)) {
        if (!(key in en)) continue;
        if (typeof value !== 'string' || value.trim() === '') {
          problems.push(`${file}: ${key} is empty`);
          continue;
        }
        try {
          const mine = names(argumentsOf(parse(value, { ignoreTag: true })));
          const theirs = names(argumentsOf(parse(en[key]!, { ignoreTag: true })));
          if (mine.join() !== theirs.join()) problems.push(`${file}: ${key} has {${mine.join(', ')}}, en has {${theirs.join(', ')}}`);
          compileMessage(value, locale as Locale);
        } catch (error) {
          problems.push(`${file}: ${key} is not a valid ICU message (${(error as Error).message})`);
        }
      }
    }
    expect(problems).toEqual([]);
  });

  it('every English message is valid ICU, and a plural has the forms its languages need', () => {
    const problems: string[] = [];
    for (const file of englishFiles) {
      for (const [key, value] of Object.entries(readJson('en', file))) {
        try {
          compileMessage(value, 'en');
        } catch (error) {
          problems.push(`${key}: ${(error as Error).message}`);
        }
      }
    }
    expect(problems).toEqual([]);
    // The test can fail: a message whose placeholder was renamed is caught.
    expect(names(argumentsOf(parse('{count, plural, one {# day} other {# days}} left for {app}')))).toEqual(['app', 'count']);
  });
});

/** English catalogue texts a page must not show in another language: whole messages, and the fixed parts of ones with placeholders. */
function englishTexts(): string[] {
  const texts = new Set<string>();
  for (const file of englishFiles.filter((f) => !(CONSOLE_FILES as readonly string[]).includes(f))) {
    for (const value of Object.values(readJson('en', file))) {
      if (/\{[^{}]*,/.test(value)) continue; // plural and select: their forms are checked by the catalogue test
      for (const part of value.split(/\{\w+\}/)) {
        const text = part.trim();
        if (text.length >= 6 && /[a-z]/i.test(text) && /\s/.test(text)) texts.add(text);
      }
    }
  }
  return [...texts];
}

/** What a person reads on the page: the body's text, without scripts, the language names of the switcher and text marked English. */
function visibleText(html: string): string {
  return html
    .replace(/<head>[\s\S]*?<\/head>/, ' ')
    .replace(/<script[\s\S]*?<\/script>/g, ' ')
    .replace(/<(span|p|code|div)[^>]*\blang="en"[^>]*>[\s\S]*?<\/\1>/g, ' ')
    .replace(/<option[\s\S]*?<\/option>/g, ' ')
    .replace(/<[^>]+>/g, ' ')
    .replace(/&#39;|&#x27;/g, "'")
    .replace(/&quot;/g, '"')
    .replace(/&lt;/g, '<')
    .replace(/&gt;/g, '>')
    .replace(/&amp;/g, '&')
    .replace(/\s+/g, ' ');
}

describe('hosted pages in each language show no English catalogue text', () => {
  let t: TestApp;
  const english = englishTexts();
  beforeAll(async () => {
    t = await buildTestApp();
  });
  afterAll(async () => t.close());

  it('the check sees English: the English pages do show the texts it looks for', async () => {
    const page = visibleText((await t.app.inject('/login?ui_locales=en')).body);
    expect(english.filter((text) => page.includes(text)).length).toBeGreaterThan(3);
  });

  it.each(OTHERS)('%s: sign-in, registration, password and magic-link pages, error pages, consent and account', async (locale) => {
    const client = await makeClient(t, { name: 'Acme Notes' });
    const q = `ui_locales=${encodeURIComponent(locale)}`;
    const pages: Array<[string, string]> = [];
    const visitor = new Browser(t.app);
    for (const path of [`/login?${q}`, `/register?${q}`, `/password/forgot?${q}`, `/magic-link/request?${q}`, `/error?${q}`, `/consent?${q}`, `/account?${q}`]) {
      pages.push([path, (await visitor.get(path)).body]);
    }
    // A refused redirect_uri: the error page with its developer hints.
    const refused = authorizeUrl(client, { redirectUri: 'https://app.example/other', extra: { ui_locales: locale } }).url;
    pages.push(['authorize with a wrong redirect_uri', (await visitor.get(refused)).body]);
    // Signed in: the consent page of a flow, and the account page.
    const member = new Browser(t.app);
    await member.register();
    const authorize = await member.get(authorizeUrl(client, { extra: { ui_locales: locale } }).url);
    expect(authorize.statusCode).toBe(302);
    const consent = await member.get(authorize.headers.location as string);
    expect(consent.body).toContain('name="action" value="allow"');
    pages.push(['consent', consent.body]);
    pages.push(['account', (await member.get(`/account?${q}`)).body]);
    const found: string[] = [];
    for (const [name, html] of pages) {
      expect(html, name).toContain(`<html lang="${locale}"`);
      const text = visibleText(html);
      for (const phrase of english) if (text.includes(phrase)) found.push(`${name}: “${phrase}”`);
    }
    expect(found).toEqual([]);
  });
});
