import { describe, expect, it } from 'vitest';
import { checkRedirectUri, validateRedirectUris } from '../../src/dev/redirect-uris.js';
import { ACCEPTED_REDIRECT_URIS, REFUSED_REDIRECT_URIS } from './redirect-uri-cases.js';

describe('redirect-URI rules (docs/reference/rest-api.md#developers)', () => {
  it.each(ACCEPTED_REDIRECT_URIS)('accepts %s', (uri) => {
    expect(checkRedirectUri(uri)).toEqual({ ok: true });
  });

  it.each(REFUSED_REDIRECT_URIS)('refuses %j', (uri, reason) => {
    const check = checkRedirectUri(uri);
    expect(check.ok).toBe(false);
    if (!check.ok) expect(check.reason).toMatch(reason);
  });

  it('accepts a list of up to 20 distinct valid URIs', () => {
    const uris = Array.from({ length: 20 }, (_, i) => `https://a.example/cb${i}`);
    expect(validateRedirectUris(uris)).toEqual({ ok: true });
    expect(validateRedirectUris([])).toEqual({ ok: true });
  });

  it('refuses more than 20 URIs', () => {
    const uris = Array.from({ length: 21 }, (_, i) => `https://a.example/cb${i}`);
    expect(validateRedirectUris(uris)).toEqual({ ok: false, problems: [{ index: null, message: expect.stringMatching(/at most 20/) }] });
  });

  it('refuses duplicates and reports every bad entry by index', () => {
    const result = validateRedirectUris(['https://a.example/cb', 'javascript:alert(1)', 'https://a.example/cb']);
    expect(result).toEqual({
      ok: false,
      problems: [
        { index: 1, message: expect.stringMatching(/javascript/) },
        { index: 2, message: 'duplicate of entry 0' },
      ],
    });
  });

  it('treats entries differing only by a trailing slash as distinct', () => {
    expect(validateRedirectUris(['https://a.example/cb', 'https://a.example/cb/'])).toEqual({ ok: true });
  });
});
