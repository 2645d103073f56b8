import { describe, expect, it } from 'vitest';
import { acceptedLanguages, chooseLocale, directionOf, matchLocale, type LocaleSources } from '../../src/plugins/i18n.js';
import { backAfterSwitch } from '../../src/pages/language.js';
import { switcherBack } from '../../src/plugins/views.js';

/** The language rules of the hosted pages (docs/guides/hosted-pages.md, "Languages"). */

describe('matchLocale: BCP 47 tags to the supported locales', () => {
  it.each([
    ['en', 'en'],
    ['en-GB', 'en'],
    ['EN-us', 'en'],
    ['zh', 'zh-CN'],
    ['zh-CN', 'zh-CN'],
    ['zh-Hans', 'zh-CN'],
    ['zh-Hans-HK', 'zh-CN'],
    ['zh-SG', 'zh-CN'],
    ['zh-TW', 'zh-TW'],
    ['zh-HK', 'zh-TW'],
    ['zh-MO', 'zh-TW'],
    ['zh-Hant', 'zh-TW'],
    ['zh-Hant-CN', 'zh-TW'],
    ['zh_TW', 'zh-TW'],
    ['es', 'es'],
    ['es-419', 'es'],
    ['es-MX', 'es'],
    ['pt', 'pt-BR'],
    ['pt-BR', 'pt-BR'],
    ['pt-PT', 'pt-BR'],
    ['fr-CA', 'fr'],
    ['de-AT', 'de'],
    ['ja-JP', 'ja'],
    ['ko-KR', 'ko'],
    ['ar', 'ar'],
    ['ar-EG', 'ar'],
    ['nl', undefined],
    ['english', undefined],
    ['*', undefined],
    ['', undefined],
    ['e', undefined],
    ['es-', undefined],
    ['<script>', undefined],
  ])('%s → %s', (tag, expected) => {
    expect(matchLocale(tag)).toBe(expected);
  });
});

describe('acceptedLanguages: by q, then by order', () => {
  it.each([
    [undefined, []],
    ['', []],
    ['fr;q=0.5, de, ja;q=0.9', ['de', 'ja', 'fr']],
    ['es, ar', ['es', 'ar']],
    ['*, ko;q=0.1', ['ko']],
    ['de;q=0, fr', ['fr']],
    ['ja;q=abc, ko;q=0.5', ['ko']],
  ] as Array<[string | undefined, string[]]>)('%s → %j', (header, expected) => {
    expect(acceptedLanguages(header)).toEqual(expected);
  });
});

describe('chooseLocale: ui_locales, then the person (account, then switcher cookie), then Accept-Language, then the app, then English', () => {
  it.each<[string, LocaleSources, string]>([
    ['nothing at all', {}, 'en'],
    ['only the app default', { appDefault: 'ja' }, 'ja'],
    ['Accept-Language beats the app default', { acceptLanguage: 'de', appDefault: 'ja' }, 'de'],
    ['an unsupported Accept-Language falls to the app default', { acceptLanguage: 'nl, sv;q=0.5', appDefault: 'ja' }, 'ja'],
    ['the switcher cookie beats Accept-Language', { cookieLocale: 'es', acceptLanguage: 'de', appDefault: 'ja' }, 'es'],
    ['the saved locale beats the cookie', { userLocale: 'ar', cookieLocale: 'es', acceptLanguage: 'de' }, 'ar'],
    ['ui_locales beats everything', { uiLocales: 'ko', userLocale: 'ar', cookieLocale: 'es', acceptLanguage: 'de', appDefault: 'ja' }, 'ko'],
    ['the first supported tag of ui_locales', { uiLocales: 'nl pt-PT fr', userLocale: 'ar' }, 'pt-BR'],
    ['an unsupported ui_locales falls through', { uiLocales: 'nl', userLocale: 'ar' }, 'ar'],
    ['a damaged cookie is ignored', { cookieLocale: '../../x', acceptLanguage: 'fr' }, 'fr'],
    ['an unsupported app default gives English', { appDefault: 'nl' }, 'en'],
    ['Chinese variants by script and region', { acceptLanguage: 'zh-HK' }, 'zh-TW'],
  ])('%s', (_name, sources, expected) => {
    expect(chooseLocale(sources)).toBe(expected);
  });

  it('only Arabic is right to left', () => {
    expect(directionOf('ar')).toBe('rtl');
    expect(directionOf('he' as never)).toBe('ltr');
    expect(directionOf('zh-TW')).toBe('ltr');
  });
});

describe('backAfterSwitch: the switcher returns to a page of this site only', () => {
  const AUTH = 'https://auth.example';
  it.each([
    ['/login?client_id=app_1&ui_locales=fr', '/login?client_id=app_1&ui_locales=es'],
    ['/login?client_id=app_1', '/login?client_id=app_1'],
    ['/consent?client_id=app_1&ui_locales=en+fr', '/consent?client_id=app_1&ui_locales=es'],
    [undefined, '/account'],
    ['', '/account'],
    ['https://evil.example/x', '/account'],
    ['//evil.example/x', '/account'],
    ['/\\evil.example/x', '/account'],
    ['javascript:alert(1)', '/account'],
    ['/a/../../b', '/b'],
  ] as Array<[string | undefined, string]>)('%s → %s', (back, expected) => {
    expect(backAfterSwitch(back, 'es', AUTH)).toBe(expected);
  });
});

describe('switcherBack: the switcher never echoes an address from the query', () => {
  it.each([
    ['/login?client_id=app_1&ui_locales=fr', '/login?client_id=app_1&ui_locales=fr'],
    ['/login?next=https%3A%2F%2Fevil.example%2F&client_id=app_1', '/login?client_id=app_1'],
    ['/oauth/authorize?client_id=unknown&redirect_uri=https%3A%2F%2Fevil.example%2F&response_type=code', '/oauth/authorize?client_id=unknown&response_type=code'],
    ['/oauth/logout?post_logout_redirect_uri=%2F%5Cevil.example', '/oauth/logout'],
    ['/account/deletion/done?at=2026-12-07T10%3A00%3A00Z', '/account/deletion/done?at=2026-12-07T10%3A00%3A00Z'],
    ['/password/reset?token=abc_DEF-123', '/password/reset?token=abc_DEF-123'],
  ])('%s → %s', (url, expected) => {
    expect(switcherBack(url)).toBe(expected);
  });
});
