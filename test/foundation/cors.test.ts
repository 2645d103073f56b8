import { describe, expect, it } from 'vitest';
import { corsHeadersFor, isValidOrigin, originOf, originsOfApp, originsOfApps } from '../../src/shared/cors.js';

describe('CORS origin rules (src/shared/cors.ts)', () => {
  it('takes the origin of http(s) redirect URIs only', () => {
    expect(originOf('https://a.example/cb?x=1')).toBe('https://a.example');
    expect(originOf('https://a.example:8443/cb')).toBe('https://a.example:8443');
    expect(originOf('http://[::1]:5173/cb')).toBe('http://[::1]:5173');
    expect(originOf('com.example.app://cb')).toBeNull();
    expect(originOf('not a url')).toBeNull();
  });

  it('unites redirect-URI origins and allowed_origins; a disabled app allows none', () => {
    const app = { redirectUris: ['https://a.example/cb', 'https://a.example/other', 'com.example.app://cb'], allowedOrigins: ['https://b.example'] };
    expect(originsOfApp(app)).toEqual(['https://a.example', 'https://b.example']);
    expect(originsOfApp({ ...app, disabled: true })).toEqual([]);
    expect(originsOfApps([app, { redirectUris: ['http://127.0.0.1:3001/cb'], allowedOrigins: [] }])).toEqual(
      new Set(['https://a.example', 'https://b.example', 'http://127.0.0.1:3001']),
    );
  });

  it.each([
    ['https://spa.example', true],
    ['http://localhost:5173', true],
    ['http://[::1]:5173', true],
    ['https://spa.example/', false],
    ['https://spa.example/app', false],
    ['https://SPA.example', false],
    ['https://spa.example:443', false],
    ['http://spa.example', false],
    ['https://u@spa.example', false],
    ['*', false],
    ['null', false],
  ])('isValidOrigin(%s) = %s', (origin, valid) => {
    expect(isValidOrigin(origin)).toBe(valid);
  });

  it('builds headers for an allowed origin only, and always varies on Origin', () => {
    const allowed = new Set(['https://a.example']);
    expect(corsHeadersFor('https://a.example', allowed)).toEqual({
      vary: 'Origin',
      'access-control-allow-origin': 'https://a.example',
      'access-control-expose-headers': 'ETag, Retry-After, WWW-Authenticate, DPoP-Nonce',
    });
    expect(corsHeadersFor('https://a.example', ['https://a.example'], 'preflight')).toEqual({
      vary: 'Origin',
      'access-control-allow-origin': 'https://a.example',
      'access-control-allow-methods': 'GET, POST, PUT, DELETE',
      'access-control-allow-headers': 'Authorization, Content-Type, X-Client-Id, If-Match, DPoP',
      'access-control-max-age': '600',
    });
    expect(corsHeadersFor('https://evil.example', allowed)).toEqual({ vary: 'Origin' });
    expect(corsHeadersFor(undefined, allowed)).toEqual({ vary: 'Origin' });
  });
});
