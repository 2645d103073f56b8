import { DEFAULT_PASSWORD_POLICY, effectiveMinLength, type PasswordPolicy } from '../sign-in/password-policy.js';

/** What a hosted page tells a person about the password to choose, before they type (docs/guides/password-policy.md). */
export function passwordRulesOf(policy: PasswordPolicy | undefined, platformFloor: number): { min: number; classes: number } {
  const p = policy ?? DEFAULT_PASSWORD_POLICY;
  return { min: effectiveMinLength(p, platformFloor), classes: p.characterClasses };
}
