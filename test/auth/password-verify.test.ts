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

  it.each(['', 'not-a-hash', '$argon2id$v=19$m=19456,t=2,p=1$broken'])('a malformed stored hash (%j) → false', async (hash) => {
    expect(await verifyPassword(hash, 'anything at all')).toBe(false);
  });

  it('a caller whose client has gone → TurnAbandoned, not false', async () => {
    await expect(verifyPassword(await hashPassword('right horse battery'), 'right horse battery', { abandoned: () => true })).rejects.toBeInstanceOf(TurnAbandoned);
  });
});
