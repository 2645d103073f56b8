import { describe, expect, it } from 'vitest';
import { checkChallenge, isValidVerifier, s256, verifyPkce } from '../../src/sign-in/pkce.js';

describe('pkce (pure)', () => {
  const V = 'dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk';
  const CH = 'E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM';

  it('matches the RFC 7636 Appendix B vector', () => {
    expect(s256(V)).toBe(CH);
    expect(verifyPkce(V, CH)).toBe(true);
    expect(verifyPkce(`${V.slice(0, -1)}l`, CH)).toBe(false);
  });

  it.each([
    ['a'.repeat(43), true],
    ['a'.repeat(128), true],
    ['a'.repeat(42), false],
    ['a'.repeat(129), false],
    [`${'a'.repeat(43)} `, false],
    [`${'a'.repeat(43)}+`, false],
    [`${'a'.repeat(43)}é`, false],
    ['-._~'.repeat(11), true],
  ])('verifier %j valid=%s', (v, ok) => {
    expect(isValidVerifier(v)).toBe(ok);
  });

  it('checkChallenge: S256 only, 43 base64url chars, required when asked', () => {
    expect(checkChallenge(CH, 'S256', true)).toEqual({ ok: true, challenge: CH });
    expect(checkChallenge(undefined, undefined, false)).toEqual({ ok: true, challenge: null });
    expect(checkChallenge(undefined, undefined, true).ok).toBe(false);
    expect(checkChallenge(CH, 'plain', false).ok).toBe(false);
    expect(checkChallenge(CH, undefined, false).ok).toBe(false);
    expect(checkChallenge(undefined, 'S256', false).ok).toBe(false);
    expect(checkChallenge(CH.slice(1), 'S256', false).ok).toBe(false);
    expect(checkChallenge(`${CH.slice(1)}=`, 'S256', false).ok).toBe(false);
  });
});
