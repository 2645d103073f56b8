import { describe, expect, it } from 'vitest';
import { passkeyName } from '../../src/passkeys/names.js';
import { relyingPartyOf } from '../../src/passkeys/relying-party.js';
import { usableAt } from '../../src/passkeys/service.js';

describe('the relying party comes from AUTH_URL', () => {
  it.each([
    ['https://auth.example.com', { enabled: true, id: 'auth.example.com', origin: 'https://auth.example.com' }],
    ['https://auth.example.com:8443/base', { enabled: true, id: 'auth.example.com', origin: 'https://auth.example.com:8443' }],
    ['http://localhost:3000', { enabled: true, id: 'localhost', origin: 'http://localhost:3000' }],
    ['http://gatehouse.localhost:3000', { enabled: true, id: 'gatehouse.localhost', origin: 'http://gatehouse.localhost:3000' }],
    ['https://LOGIN.Example.COM', { enabled: true, id: 'login.example.com', origin: 'https://login.example.com' }],
  ])('%s → RP ID and origin', (authUrl, expected) => {
    expect(relyingPartyOf(authUrl)).toMatchObject(expected);
  });

  it.each([
    ['http://127.0.0.1:3000', /IP address/],
    ['https://10.0.0.5', /IP address/],
    ['http://[::1]:3000', /IP address/],
    ['https://[2001:db8::1]', /IP address/],
    ['http://auth.example.com', /not https/],
  ])('%s → off, saying why', (authUrl, reason) => {
    const rp = relyingPartyOf(authUrl);
    expect(rp.enabled).toBe(false);
    expect(!rp.enabled && rp.reason).toMatch(reason);
  });
});

describe('passkey names', () => {
  it.each([
    ['Laptop', 'Laptop'],
    ['  YubiKey 5  ', 'YubiKey 5'],
    ['手机', '手机'],
    ['e\u0301', '\u00e9'],
    ['x'.repeat(64), 'x'.repeat(64)],
    ['😀'.repeat(64), '😀'.repeat(64)],
  ])('%j is stored as %j', (input, stored) => {
    expect(passkeyName(input)).toBe(stored);
  });

  it.each([[''], ['   '], ['x'.repeat(65)], ['tab\there'], ['new\nline'], ['zero\u200bwidth'], ['bidi\u202eoverride'], ['line\u2028separator']])('%j is refused', (input) => {
    expect(passkeyName(input)).toBeNull();
  });
});

describe('where a passkey signs in (an app\'s passkey never opens the account elsewhere)', () => {
  it.each([
    { passkey: null, at: null, secondFactor: false, expected: true, name: 'account-wide, on Gatehouse\'s pages' },
    { passkey: null, at: 'app_a', secondFactor: false, expected: true, name: 'account-wide, at an app' },
    { passkey: null, at: 'app_a', secondFactor: true, expected: true, name: 'account-wide, as a second factor' },
    { passkey: 'app_a', at: 'app_a', secondFactor: false, expected: true, name: 'an app\'s, at that app' },
    { passkey: 'app_a', at: 'app_b', secondFactor: false, expected: false, name: 'an app\'s, at another app' },
    { passkey: 'app_a', at: null, secondFactor: false, expected: false, name: 'an app\'s, on Gatehouse\'s pages (the console\'s sign-in too)' },
    { passkey: 'app_a', at: 'app_a', secondFactor: true, expected: false, name: 'an app\'s, as a second factor even at that app' },
    { passkey: 'app_a', at: null, secondFactor: true, expected: false, name: 'an app\'s, as a second factor on Gatehouse\'s pages' },
  ])('$name → $expected', ({ passkey, at, secondFactor, expected }) => {
    expect(usableAt({ appId: passkey }, at, secondFactor)).toBe(expected);
  });
});
