import { generateKeyPairSync } from 'node:crypto';
import { compactVerify, decodeProtectedHeader } from 'jose';
import { describe, expect, it } from 'vitest';
import { signingInput, signJws } from '../../src/plugins/jws.js';

// Our signatures (src/plugins/jws.ts) are made by node:crypto and must be what jose verifies.
describe('JWT signing with node:crypto', () => {
  const keys = {
    ES256: generateKeyPairSync('ec', { namedCurve: 'P-256' }),
    RS256: generateKeyPairSync('rsa', { modulusLength: 2048 }),
  };

  for (const alg of ['ES256', 'RS256'] as const) {
    it(`${alg}: the JWT is its signing input and a signature jose verifies`, async () => {
      const input = signingInput(alg, { kid: 'k1', typ: 'at+jwt' }, { sub: 'usr_1', exp: 2 });
      const jwt = await signJws(alg, input, keys[alg].privateKey);
      expect(jwt.startsWith(`${input}.`)).toBe(true);
      expect(decodeProtectedHeader(jwt)).toEqual({ alg, typ: 'at+jwt', kid: 'k1' });
      const { payload } = await compactVerify(jwt, keys[alg].publicKey, { algorithms: [alg] });
      expect(JSON.parse(Buffer.from(payload).toString())).toEqual({ sub: 'usr_1', exp: 2 });
    });
  }

  it('RS256 is deterministic: signing an input again gives the very same JWT', async () => {
    const input = signingInput('RS256', { kid: 'k1', typ: 'JWT' }, { sub: 'usr_1' });
    expect(await signJws('RS256', input, keys.RS256.privateKey)).toBe(await signJws('RS256', input, keys.RS256.privateKey));
  });

  it('a key of the wrong type fails the signature, as a rejection', async () => {
    const input = signingInput('ES256', { kid: 'k1', typ: 'JWT' }, { sub: 'usr_1' });
    await expect(signJws('ES256', input, keys.ES256.publicKey)).rejects.toThrow();
  });
});
