/**
 * How a user authenticated, as ID tokens say it (OIDC Core §2 `amr`, `acr`).
 *
 * `amr` uses RFC 8176 values where one fits: `pwd` (password), `otp` (a TOTP or recovery code),
 * `hwk` / `swk` (a passkey bound to one device / synced between devices), `mfa` (more than one factor).
 * Two methods RFC 8176 has no value for get names of our own: `email` (a link or code sent by mail)
 * and `fed` (the external identity provider).
 */
export type Amr = 'pwd' | 'email' | 'fed' | 'otp' | 'hwk' | 'swk' | 'mfa';

const AMR_VALUES: readonly Amr[] = ['pwd', 'email', 'fed', 'otp', 'hwk', 'swk', 'mfa'];

/** One factor (a password, a mailed link, the provider). */
export const ACR_SINGLE_FACTOR = 'urn:gatehouse:acr:1fa';
/** Two factors, or one phishing-resistant passkey with user verification. */
export const ACR_MULTI_FACTOR = 'urn:gatehouse:acr:2fa';

export const ACR_VALUES_SUPPORTED = [ACR_SINGLE_FACTOR, ACR_MULTI_FACTOR];

/** A passkey (user-verified, bound to the origin) counts as strong on its own; otherwise two factors do. */
export function isMultiFactor(amr: readonly Amr[]): boolean {
  return amr.includes('mfa') || amr.includes('hwk') || amr.includes('swk');
}

export function acrOf(amr: readonly Amr[]): string {
  return isMultiFactor(amr) ? ACR_MULTI_FACTOR : ACR_SINGLE_FACTOR;
}

/** The stored form (JSON text) of an `amr` list. */
export function serializeAmr(amr: readonly Amr[]): string {
  return JSON.stringify(amr);
}

/** Reads a stored `amr`; rows written before amr was recorded were one-factor password or mail sign-ins. */
export function parseAmr(stored: string | null): Amr[] {
  if (stored === null) return [];
  try {
    const value: unknown = JSON.parse(stored);
    return Array.isArray(value) ? value.filter((v): v is Amr => AMR_VALUES.includes(v as Amr)) : [];
  } catch {
    return [];
  }
}
