import { DEFAULT_PASSWORD_POLICY, effectiveMinLength, type PasswordPolicy } from '../sign-in/password-policy.js';

export interface PasswordRules {
  /** The minimum length in force (code points). */
  min: number;
  /** How many kinds of character must be mixed; 0 = no composition rule. */
  classes: number;
}

/** What a hosted page tells a person about the password to choose, before they type (docs/guides/password-policy.md). */
export function passwordRulesOf(policy: PasswordPolicy | undefined, platformFloor: number): PasswordRules {
  const p = policy ?? DEFAULT_PASSWORD_POLICY;
  return { min: effectiveMinLength(p, platformFloor), classes: p.characterClasses };
}
