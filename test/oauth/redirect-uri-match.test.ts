import { describe, expect, it } from 'vitest';
import { isRegisteredRedirectUri, nearestRegisteredRedirectUri, redirectUriDifferences } from '../../src/shared/redirect-uri-match.js';

/** The one redirect-URI matching rule (exact string equality) and the near-miss hint, table-tested. */

const REGISTERED = ['https://app.example/cb', 'http://127.0.0.1:8080/callback', 'com.example.app:/oauth2redirect'];

describe('isRegisteredRedirectUri: exact string equality, no normalisation', () => {
  it.each([
    ['https://app.example/cb', true],
    ['http://127.0.0.1:8080/callback', true],
    ['com.example.app:/oauth2redirect', true],
    ['https://app.example/cb/', false],
    ['https://APP.example/cb', false],
    ['https://app.example:443/cb', false],
    ['https://app.example/cb?x=1', false],
    ['https://app.example/cb#f', false],
    ['https://app.example/%63b', false],
    ['http://localhost:8080/callback', false],
    ['http://127.0.0.1:9090/callback', false],
    ['https://app.example/cb ', false],
    ['', false],
  ])('%j → %s', (uri, expected) => {
    expect(isRegisteredRedirectUri(REGISTERED, uri)).toBe(expected);
  });
});

describe('redirectUriDifferences', () => {
  it.each([
    ['https://app.example/cb', 'https://app.example/cb', []],
    ['https://app.example/cb', 'http://app.example/cb', ['scheme']],
    ['http://localhost:8080/callback', 'http://127.0.0.1:8080/callback', ['host']],
    ['http://127.0.0.1:8080/callback', 'http://127.0.0.1:9090/callback', ['port']],
    ['https://app.example/cb', 'https://app.example/cb/', ['trailing_slash']],
    ['https://app.example/cb', 'https://app.example/Cb', ['path']],
    ['https://app.example/cb', 'https://app.example/cb?env=dev', ['query']],
    ['https://app.example/cb', 'https://APP.example:443/cb', ['spelling']],
    ['https://app.example/cb', 'https://other.example/x', ['host', 'path']],
    ['https://app.example/cb', 'not a url', undefined],
  ])('%s vs %s', (registered, uri, expected) => {
    expect(redirectUriDifferences(registered, uri)).toEqual(expected);
  });
});

describe('nearestRegisteredRedirectUri', () => {
  it.each([
    ['https://app.example/cb/', { uri: 'https://app.example/cb', differences: ['trailing_slash'] }],
    ['http://localhost:8080/callback', { uri: 'http://127.0.0.1:8080/callback', differences: ['host'] }],
    ['com.example.app:/oauth2', { uri: 'com.example.app:/oauth2redirect', differences: ['path'] }],
    ['https://evil.example/steal?x=1', undefined],
    ['%%%', undefined],
  ])('%s', (uri, expected) => {
    expect(nearestRegisteredRedirectUri(REGISTERED, uri)).toEqual(expected);
  });
});
