import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import { parseClientMetadata, redirectClaim } from '../../src/registration/service.js';

/** The registration metadata rules (docs/reference/oauth.md#dynamic-client-registration-rfc-7591), table-tested. */

const base = { redirect_uris: ['https://app.example/cb'] };
const errorOf = (body: unknown, open = false): string | undefined => {
  try {
    parseClientMetadata(body, { open });
    return undefined;
  } catch (error) {
    return (error as AppError).code;
  }
};

describe('parseClientMetadata', () => {
  it.each([
    ['not an object', [], false, 'invalid_client_metadata'],
    ['no redirect URIs', {}, false, 'invalid_redirect_uri'],
    ['redirect URI with userinfo', { redirect_uris: ['https://u:p@app.example/cb'] }, false, 'invalid_redirect_uri'],
    ['non-canonical host', { redirect_uris: ['https://APP.example/cb'] }, false, 'invalid_redirect_uri'],
    ['duplicate redirect URIs', { redirect_uris: ['https://app.example/cb', 'https://app.example/cb'] }, false, 'invalid_redirect_uri'],
    ['open registration of a confidential client', { ...base, token_endpoint_auth_method: 'client_secret_post' }, true, 'invalid_client_metadata'],
    ['open registration with the RFC default method', base, true, 'invalid_client_metadata'],
    ['refresh_token alone', { ...base, grant_types: ['refresh_token'] }, false, 'invalid_client_metadata'],
    ['a numeric name', { ...base, client_name: 7 }, false, 'invalid_client_metadata'],
    ['a valid public client', { ...base, token_endpoint_auth_method: 'none' }, true, undefined],
    ['a valid confidential client by token', base, false, undefined],
    ['a native private-use scheme', { redirect_uris: ['com.example.app:/cb'], token_endpoint_auth_method: 'none' }, true, undefined],
  ])('%s', (_name, body, open, expected) => {
    expect(errorOf(body, open)).toBe(expected);
  });

  it('defaults to a confidential client named "Registered client" and trims the name', () => {
    expect(parseClientMetadata(base, { open: false })).toEqual({ clientName: 'Registered client', redirectUris: base.redirect_uris, authMethod: 'client_secret_basic' });
    expect(parseClientMetadata({ ...base, client_name: '  Tool  ' }, { open: false }).clientName).toBe('Tool');
  });
});

describe('redirectClaim', () => {
  it.each([
    ['https://app.example/cb', 'host:app.example'],
    ['https://app.example:8443/other', 'host:app.example'],
    ['http://127.0.0.1:8000/cb', 'uri:http://127.0.0.1:8000/cb'],
    ['http://localhost/cb', 'uri:http://localhost/cb'],
    ['com.example.app:/cb', 'scheme:com.example.app'],
  ])('%s claims %s', (uri, claim) => {
    expect(redirectClaim(uri)).toBe(claim);
  });
});
