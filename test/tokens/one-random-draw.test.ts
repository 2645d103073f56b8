import { decodeJwt } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { makeClient, refresh, signedInWithTokens, type TestClient } from '../helpers/oauth-flows.js';
import { SecretBox } from '../../src/shared/crypto.js';
import { hashSecret, idOf, orderedSecretOf } from '../../src/shared/ids.js';

// docs/adr/0014-one-random-draw-per-token-response.md: a token response draws its refresh token, its
// access token's jti and the IV of its sealed replay in one call. The parts must never overlap: the jti
// travels in a readable JWT and the IV sits in clear in the database, so a byte of either taken from
// the refresh token would hand a reader part of a live credential.

const bytes = (from: number, length: number) => Uint8Array.from({ length }, (_, i) => (from + i) & 255);

describe('values made from random bytes the caller drew', () => {
  it.each([
    { what: 'an ordered secret from 31 bytes', make: () => orderedSecretOf('rt', bytes(0, 31)) },
    { what: 'an ordered secret from 33 bytes', make: () => orderedSecretOf('rt', bytes(0, 33)) },
    { what: 'an id from 15 bytes', make: () => idOf('at', bytes(0, 15)) },
    { what: 'an id from 17 bytes', make: () => idOf('at', bytes(0, 17)) },
    { what: 'a seal under an 11-byte IV', make: () => new SecretBox('k'.repeat(48), 'test').seal('x', bytes(0, 11)) },
    { what: 'a seal under a 16-byte IV', make: () => new SecretBox('k'.repeat(48), 'test').seal('x', bytes(0, 16)) },
  ])('refuses $what', ({ make }) => {
    expect(make).toThrow();
  });

  it('an ordered secret from drawn bytes has the layout whose stored key starts with its time (hashSecret)', () => {
    const secret = orderedSecretOf('rt', bytes(7, 32));
    expect(secret).toMatch(/^rt_[0-9a-hjkmnp-tv-z]{10}[A-Za-z0-9_-]{43}$/);
    expect(secret.slice(13)).toBe(Buffer.from(bytes(7, 32)).toString('base64url'));
    expect(hashSecret(secret).slice(0, 10)).toBe(secret.slice(3, 13));
  });

  it('an id from drawn bytes has newId\'s layout, each byte one character', () => {
    expect(idOf('at', bytes(0, 16))).toMatch(/^at_[0-9a-hjkmnp-tv-z]{10}0123456789abcdef$/);
  });

  it('a value sealed under a given IV opens again, and names that IV', () => {
    const box = new SecretBox('k'.repeat(48), 'test');
    const sealed = box.seal('the response', bytes(100, 12));
    expect(sealed.split('.')[1]).toBe(Buffer.from(bytes(100, 12)).toString('base64url'));
    expect(box.open(sealed)).toBe('the response');
  });
});

describe('a refresh draws its random values once, in parts that do not overlap', () => {
  let t: TestApp;
  let client: TestClient;

  beforeAll(async () => {
    t = await buildTestApp();
    client = await makeClient(t);
  });
  afterAll(async () => t.close());

  it('the stored IV and the jti share no bytes with the refresh token that the response hands out', async () => {
    const { tokens } = await signedInWithTokens(t, client);
    const res = await refresh(t.app, client, tokens.refresh_token);
    expect(res.statusCode).toBe(200);
    const next = res.json() as { refresh_token: string; access_token: string };
    const stored = await t.db.selectFrom('refresh_tokens').select('successor_response').where('token_hash', '=', hashSecret(tokens.refresh_token)).executeTakeFirstOrThrow();
    const iv = Buffer.from(stored.successor_response!.split('.')[1]!, 'base64url');
    const secretBytes = Buffer.from(next.refresh_token.slice(13), 'base64url');
    expect(iv).toHaveLength(12);
    expect(secretBytes).toHaveLength(32);
    // Any 4 bytes of the IV found in the secret would mean the draw was shared (a chance match is 2^-32 per place).
    for (let i = 0; i + 4 <= iv.length; i++) expect(secretBytes.includes(iv.subarray(i, i + 4))).toBe(false);
    const jti = decodeJwt(next.access_token).jti as string;
    expect(jti).toMatch(/^at_[0-9a-hjkmnp-tv-z]{26}$/);
    // The jti's random part (16 characters of 5 bits) is not the secret's first bytes either.
    const secretAsId = idOf('at', secretBytes.subarray(0, 16)).slice(13);
    expect(jti.slice(13)).not.toBe(secretAsId);
  });

  it('two refreshes never share a refresh token, jti or IV', async () => {
    const seen = { secrets: new Set<string>(), jtis: new Set<string>(), ivs: new Set<string>() };
    for (let i = 0; i < 5; i++) {
      const { tokens } = await signedInWithTokens(t, client);
      const next = (await refresh(t.app, client, tokens.refresh_token)).json() as { refresh_token: string; access_token: string };
      const stored = await t.db.selectFrom('refresh_tokens').select('successor_response').where('token_hash', '=', hashSecret(tokens.refresh_token)).executeTakeFirstOrThrow();
      seen.secrets.add(next.refresh_token);
      seen.jtis.add(decodeJwt(next.access_token).jti as string);
      seen.ivs.add(stored.successor_response!.split('.')[1]!);
    }
    expect([seen.secrets.size, seen.jtis.size, seen.ivs.size]).toEqual([5, 5, 5]);
  });
});
