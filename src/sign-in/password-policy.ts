/**
 * The password rules every door applies (registration, reset, change, import): one pure function over
 * the policy of the app the person is signing in to, table-tested in test/sign-in/password-policy.test.ts.
 * Length and a breach list, not composition, by default (NIST SP 800-63B §3.1.1.2;
 * docs/guides/password-policy.md).
 */

/** The platform's hard limits, whatever an app asks for (code points after NFC). */
export const PASSWORD_MIN = 8;
export const PASSWORD_MAX = 128;
/** The most previous passwords an app may refuse to see again (each costs one argon2 check on a change). */
export const PASSWORD_HISTORY_MAX = 24;
/** The longest maximum age an app may set, in days. */
export const PASSWORD_MAX_AGE_DAYS_MAX = 3650;

/** An app's password policy (docs/guides/password-policy.md). */
export interface PasswordPolicy {
  /** At least PASSWORD_MIN and the platform floor (PASSWORD_MIN_LENGTH); at most PASSWORD_MAX. */
  minLength: number;
  /** How many of the four kinds (lower case, upper case, digit, other) a password must mix; 0 = off. */
  characterClasses: number;
  /** Days a password is good for before a sign-in asks for a new one; null = forever. */
  maxAgeDays: number | null;
  /** How many previous passwords may not be chosen again; 0 = off. */
  historyCount: number;
}

export const DEFAULT_PASSWORD_POLICY: Readonly<PasswordPolicy> = { minLength: PASSWORD_MIN, characterClasses: 0, maxAgeDays: null, historyCount: 0 };

export type PasswordProblem = 'too_short' | 'too_long' | 'equals_email' | 'character_classes' | 'common' | 'reused';

/** Length in Unicode code points (not UTF-16 units). */
export const codePointLength = (value: string): number => {
  let n = 0;
  for (const _ of value) n++;
  return n;
};

/** The minimum length in force: the app's, never below the platform floor nor above the maximum. */
export function effectiveMinLength(policy: Pick<PasswordPolicy, 'minLength'>, platformFloor: number): number {
  return Math.min(PASSWORD_MAX, Math.max(PASSWORD_MIN, platformFloor, policy.minLength));
}

/** How many of the four kinds of character (lower case, upper case, decimal digit, anything else) a password uses. */
export function characterClassCount(password: string): number {
  let lower = 0;
  let upper = 0;
  let digit = 0;
  let other = 0;
  for (const ch of password) {
    if (/\p{Ll}/u.test(ch)) lower = 1;
    else if (/\p{Lu}/u.test(ch)) upper = 1;
    else if (/\p{Nd}/u.test(ch)) digit = 1;
    else other = 1;
  }
  return lower + upper + digit + other;
}

export interface PasswordFacts {
  /** The account's email address. */
  email: string;
  /** In the bundled breach list, or reported by the HIBP range API. */
  breached: boolean;
  /** Equal to one of the account's last `historyCount` passwords (checked by the caller with argon2). */
  reused?: boolean;
}

/**
 * The first problem of a password under `policy` (cheap checks first), or null when acceptable. The
 * password is taken after NFC normalisation.
 */
export function passwordProblem(password: string, policy: PasswordPolicy, platformFloor: number, facts: PasswordFacts): PasswordProblem | null {
  const normalized = password.normalize('NFC');
  const length = codePointLength(normalized);
  if (length < effectiveMinLength(policy, platformFloor)) return 'too_short';
  if (length > PASSWORD_MAX) return 'too_long';
  if (normalized.toLowerCase() === facts.email.trim().toLowerCase()) return 'equals_email';
  if (policy.characterClasses > 0 && characterClassCount(normalized) < policy.characterClasses) return 'character_classes';
  if (facts.breached) return 'common';
  if (facts.reused) return 'reused';
  return null;
}

/** The problem in words, for the `details` of a weak_password error (English; the pages translate by code). */
export function passwordProblemText(problem: PasswordProblem, policy: PasswordPolicy, platformFloor: number): string {
  switch (problem) {
    case 'too_short':
      return `must be at least ${effectiveMinLength(policy, platformFloor)} characters`;
    case 'too_long':
      return `must be at most ${PASSWORD_MAX} characters`;
    case 'equals_email':
      return 'must not be your email address';
    case 'character_classes':
      return `must mix at least ${policy.characterClasses} of: lower-case letters, upper-case letters, digits, other characters`;
    case 'common':
      return 'is in a list of common or breached passwords';
    case 'reused':
      return `must not be one of your last ${policy.historyCount} passwords`;
  }
}

/**
 * Has the password (just verified) outlived the policy's maximum age? Never without a maximum. A password
 * never set here (`password_changed_at` null: an imported hash, which no policy could check) has outlived
 * any maximum, so the first sign-in to such an app asks for one checked under its policy
 * (docs/guides/password-policy.md#imported-passwords).
 */
export function passwordExpired(passwordChangedAt: number | null, policy: Pick<PasswordPolicy, 'maxAgeDays'>, now: number): boolean {
  if (policy.maxAgeDays === null) return false;
  if (passwordChangedAt === null) return true;
  return now - passwordChangedAt >= policy.maxAgeDays * 86400;
}
