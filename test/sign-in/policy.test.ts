import { describe, expect, it } from 'vitest';
import { AppError } from '../../src/errors.js';
import {
  type CodeBasisProblem,
  codeBasisProblem,
  factorChangeRefusal,
  maySignIn,
  missingRequiredFields,
  mustReauthenticate,
  nextStep,
  type RefusalStyle,
  refusalError,
  secondFactorDemand,
  secondFactorsOf,
  type SignInRefusal,
  withSecondFactor,
} from '../../src/sign-in/policy.js';
import { acrOf, isMultiFactor, parseAmr, serializeAmr } from '../../src/shared/acr.js';
import {
  CODE_BASIS_CASES,
  FACTOR_CHANGE_CASES,
  MAY_SIGN_IN_CASES,
  NEXT_STEP_CASES,
  REAUTHENTICATION_CASES,
  SECOND_FACTOR_CASES,
} from './policy-cases.js';

/** The pure sign-in policy (src/sign-in/policy.ts), held to the tables every door is held to. */

const membershipOf = (m: 'none' | 'active' | 'blocked') => (m === 'none' ? undefined : { status: m });

describe('maySignIn', () => {
  it.each(MAY_SIGN_IN_CASES)('$name → $expected', ({ userStatus, membership, expected }) => {
    expect(maySignIn({ status: userStatus }, membershipOf(membership))).toBe(expected);
  });
});

describe('mustReauthenticate (prompt=login, max_age)', () => {
  const NOW = 1_700_000_000;
  it.each(REAUTHENTICATION_CASES)('$name → $expected', ({ promptLogin, maxAge, sinceAuth, expected }) => {
    expect(mustReauthenticate({ promptLogin, maxAge }, NOW - sinceAuth, NOW)).toBe(expected);
  });
});

describe('nextStep', () => {
  it.each(NEXT_STEP_CASES)('$name → $expected', (c) => {
    const step = nextStep(c.user, { requiredFields: c.requiredFields, mfa: c.mfa ?? 'optional' }, {
      requestedScope: c.requestedScope,
      consentedScope: c.consentedScope,
      forceConsent: c.forceConsent,
      consentImplied: c.consentImplied,
      amr: c.amr ?? ['pwd'],
      enrolled: c.enrolled ?? [],
    });
    expect(step).toBe(c.expected);
  });

  it('missingRequiredFields keeps the app order and counts an unverified address; an app that requires MFA requires a proven address', () => {
    const user = { name: null, phone_number: '+14155550100', birthdate: '', email_verified: 0 as const };
    expect(missingRequiredFields({ requiredFields: ['email_verified', 'birthdate', 'phone_number', 'name'], mfa: 'optional' }, user)).toEqual(['email_verified', 'birthdate', 'name']);
    expect(missingRequiredFields({ requiredFields: [], mfa: 'optional' }, user)).toEqual([]);
    expect(missingRequiredFields({ requiredFields: ['name'], mfa: 'required' }, user)).toEqual(['name', 'email_verified']);
    expect(missingRequiredFields({ requiredFields: [], mfa: 'required' }, { ...user, email_verified: 1 })).toEqual([]);
  });
});

describe('secondFactorDemand (docs/guides/mfa-and-passkeys.md)', () => {
  it.each(SECOND_FACTOR_CASES)('$name → $expected', ({ amr, enrolled, policy, stepUp, emailVerified, expected }) => {
    expect(secondFactorDemand(amr, enrolled, policy, { emailVerified: emailVerified ?? true }, stepUp)).toBe(expected);
  });

  it.each([
    { totp: false, passkeys: 0, recoveryCodes: 0, expected: [] },
    { totp: true, passkeys: 0, recoveryCodes: 0, expected: ['totp'] },
    { totp: false, passkeys: 2, recoveryCodes: 0, expected: ['passkey'] },
    { totp: true, passkeys: 1, recoveryCodes: 10, expected: ['totp', 'passkey', 'recovery_code'] },
    { totp: false, passkeys: 1, recoveryCodes: 3, expected: ['passkey', 'recovery_code'] },
    // Recovery codes left behind by a removed factor back up nothing: they are not a factor alone.
    { totp: false, passkeys: 0, recoveryCodes: 10, expected: [] },
  ])('secondFactorsOf(totp $totp, $passkeys passkeys, $recoveryCodes recovery codes) → $expected', ({ expected, ...summary }) => {
    expect(secondFactorsOf(summary)).toEqual(expected);
  });

  it('a second factor adds its method and mfa once, keeping the first factor', () => {
    expect(withSecondFactor(['pwd'], 'otp')).toEqual(['pwd', 'otp', 'mfa']);
    expect(withSecondFactor(['email'], 'swk')).toEqual(['email', 'swk', 'mfa']);
    expect(withSecondFactor(['pwd', 'otp', 'mfa'], 'otp')).toEqual(['pwd', 'otp', 'mfa']);
  });

  it('acr says two factors exactly when amr does', () => {
    for (const amr of [['pwd'], ['email'], ['fed'], ['pwd', 'otp', 'mfa'], ['hwk'], ['swk']] as const) {
      expect(acrOf(amr)).toBe(isMultiFactor(amr) ? 'urn:gatehouse:acr:2fa' : 'urn:gatehouse:acr:1fa');
    }
    expect(isMultiFactor(['pwd', 'fed'])).toBe(false);
  });

  it('stored amr round-trips and unknown or broken values are dropped', () => {
    expect(parseAmr(serializeAmr(['pwd', 'otp', 'mfa']))).toEqual(['pwd', 'otp', 'mfa']);
    expect(parseAmr(null)).toEqual([]);
    expect(parseAmr('{"not":"a list"}')).toEqual([]);
    expect(parseAmr('not json')).toEqual([]);
    expect(parseAmr('["pwd","kba","mfa"]')).toEqual(['pwd', 'mfa']);
  });
});

describe('factorChangeRefusal', () => {
  const NOW = 1_800_000_000;
  it.each(FACTOR_CHANGE_CASES)('$name → $expected', ({ enrolled, amr, age, change, emailVerified, expected }) => {
    expect(factorChangeRefusal({ enrolled, emailVerified: emailVerified ?? true }, change ?? 'add', { amr, authTime: NOW - age }, NOW)).toBe(expected);
  });
});

describe('codeBasisProblem', () => {
  const ISSUED_AT = 1_900_000_000;

  it.each(CODE_BASIS_CASES)('$name → $expected', (c) => {
    const user = { status: c.userStatus, password_changed_at: c.passwordChangedOffset === null ? null : ISSUED_AT + c.passwordChangedOffset };
    const problem = codeBasisProblem(user, membershipOf(c.membership), { issuedAt: ISSUED_AT, scope: c.scope, consentedScope: c.consentedScope });
    expect(problem).toBe(c.expected);
  });

  it('the table covers every outcome', () => {
    const outcomes = new Set(CODE_BASIS_CASES.map((c) => c.expected));
    expect([...outcomes].sort((a, b) => String(a).localeCompare(String(b)))).toEqual(['consent_revoked', null, 'password_changed', 'user_blocked', 'user_disabled'].sort((a, b) => String(a).localeCompare(String(b))));
  });
});

describe('refusalError', () => {
  const CASES: Array<{ cause: SignInRefusal | CodeBasisProblem; style: RefusalStyle; code: string; status: number }> = [
    { cause: 'user_disabled', style: 'api', code: 'user_disabled', status: 403 },
    { cause: 'user_blocked', style: 'api', code: 'user_blocked', status: 403 },
    { cause: 'consent_revoked', style: 'api', code: 'access_denied', status: 400 },
    { cause: 'password_changed', style: 'api', code: 'access_denied', status: 400 },
    { cause: 'user_disabled', style: 'authorize', code: 'access_denied', status: 400 },
    { cause: 'user_blocked', style: 'authorize', code: 'access_denied', status: 400 },
    { cause: 'consent_revoked', style: 'authorize', code: 'access_denied', status: 400 },
    { cause: 'password_changed', style: 'authorize', code: 'access_denied', status: 400 },
    { cause: 'user_disabled', style: 'token', code: 'invalid_grant', status: 400 },
    { cause: 'user_blocked', style: 'token', code: 'invalid_grant', status: 400 },
    { cause: 'consent_revoked', style: 'token', code: 'invalid_grant', status: 400 },
    { cause: 'password_changed', style: 'token', code: 'invalid_grant', status: 400 },
  ];

  it.each(CASES)('$cause in the $style style → $status $code', ({ cause, style, code, status }) => {
    const error = refusalError(cause, style);
    expect(error).toBeInstanceOf(AppError);
    expect(error.code).toBe(code);
    expect(error.status).toBe(status);
    // The cause is logged (detail), never leaked as a different public code.
    if (style !== 'api' || code === 'access_denied') expect(error.detail).toContain(cause);
  });

  it('the authorize style tells disabled and blocked users apart in its message', () => {
    const disabled = refusalError('user_disabled', 'authorize').publicMessage;
    const blocked = refusalError('user_blocked', 'authorize').publicMessage;
    expect(disabled).toMatch(/disabled/i);
    expect(blocked).toMatch(/blocked/i);
    expect(disabled).not.toBe(blocked);
  });

  it('every refusal of the policy tables has an error in every style', () => {
    const causes = new Set<SignInRefusal | CodeBasisProblem>();
    for (const c of [...MAY_SIGN_IN_CASES, ...CODE_BASIS_CASES]) if (c.expected) causes.add(c.expected);
    for (const cause of causes) for (const style of ['api', 'authorize', 'token'] as const) expect(refusalError(cause, style)).toBeInstanceOf(AppError);
  });
});
