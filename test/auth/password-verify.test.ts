import { describe, expect, it } from 'vitest';
import { hashPassword, verifyPassword } from '../../src/auth/passwords.js';
import { TurnAbandoned } from '../../src/shared/turns.js';

// verifyPassword answers true or false and never throws for a bad stored hash; only a caller whose
// client has gone (or whose wait ran over its bound) gets a rejection, so a skipped check is never read
// as a wrong password.
describe('verifyPassword', () => {
  it.each([
    ['the right password', 'right horse battery', true],
    ['a wrong password', 'wrong horse battery', false],
  ])('%s → %s', async (_name, attempt, expected) => {
    const hash = await hashPassword('right horse battery');
    expect(await verifyPassword(hash, attempt)).toBe(expected);
  });

  // Stored by the C reference implementation (`argon2` 0.45 on npm, Gatehouse's hasher before
  // @node-rs/argon2), which writes its parameters in another order: accounts made then still sign in.
  it.each([
    ['$argon2id$v=19$m=19456,p=1,t=2$IecXVuFN4yJANv9DJdWmBg$Gy/D2T70xHd4KBhlC2f80o1EqSyHvL89Lhf4cKBju6M', 'correct horse battery staple', true],
    ['$argon2id$v=19$m=19456,p=1,t=2$IecXVuFN4yJANv9DJdWmBg$Gy/D2T70xHd4KBhlC2f80o1EqSyHvL89Lhf4cKBju6M', 'correct horse battery stapler', false],
    // Hashed from the NFC form; the same text typed with combining accents is the same password.
    ['$argon2id$v=19$m=19456,p=1,t=2$IMsh7AOOVyYndhZvHGxKVA$WmOb//IAp28NyAGwDsfeFjU91+Ppqe3LCGi53q16m2w', 'Pa\u0301ssword-de\u0301compose\u0301', true],
  ])('a hash stored by the C implementation (%#) → %s', async (hash, attempt, expected) => {
    expect(await verifyPassword(hash, attempt)).toBe(expected);
  });

  it('stores argon2id, version 0x13, 19 MiB, 2 passes, 1 lane, a 16-byte salt and a 32-byte output', async () => {
    const [, algorithm, version, parameters, salt, output] = (await hashPassword('right horse battery')).split('$');
    expect({ algorithm, version, parameters: parameters!.split(',').sort() }).toEqual({ algorithm: 'argon2id', version: 'v=19', parameters: ['m=19456', 'p=1', 't=2'] });
    expect([Buffer.from(salt!, 'base64').length, Buffer.from(output!, 'base64').length]).toEqual([16, 32]);
  });

  it.each(['', 'not-a-hash', '$argon2id$v=19$m=19456,t=2,p=1$broken'])('a malformed stored hash (%j) → false', async (hash) => {
    expect(await verifyPassword(hash, 'anything at all')).toBe(false);
  });

  it('a caller whose client has gone → TurnAbandoned, not false', async () => {
    await expect(verifyPassword(await hashPassword('right horse battery'), 'right horse battery', { abandoned: () => true })).rejects.toBeInstanceOf(TurnAbandoned);
  });
});
