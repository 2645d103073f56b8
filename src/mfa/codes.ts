import { randomBytes } from 'node:crypto';
import { generateSecret, generateURI, verify } from 'otplib';
import { hashSecret } from '../shared/ids.js';

/**
 * The pure parts of second factors: TOTP (RFC 6238: SHA-1, 6 digits, 30-second steps, the defaults
 * every authenticator app supports) and recovery codes. Table-tested in test/mfa/codes.test.ts.
 */

export const TOTP_PERIOD_SECONDS = 30;

/** A new base32 TOTP secret (160 bits, RFC 4226's recommended length). */
export function newTotpSecret(): string {
  return generateSecret({ length: 20 });
}

/** The `otpauth://` URI an authenticator app reads from the QR code. */
export function totpUri(secret: string, issuer: string, account: string): string {
  return generateURI({ issuer, label: account, secret, period: TOTP_PERIOD_SECONDS });
}

/**
 * The time step whose code `code` is, within one step of `now` either way (clock drift between the
 * phone and the server), or null. The caller accepts a step at most once (replay protection).
 */
export async function matchTotpStep(secret: string, code: string, now: number): Promise<number | null> {
  const token = code.replace(/\s+/g, '');
  if (!/^\d{6}$/.test(token)) return null;
  const result = await verify({ secret, token, epoch: now, period: TOTP_PERIOD_SECONDS, epochTolerance: TOTP_PERIOD_SECONDS });
  return result.valid ? Math.floor(now / TOTP_PERIOD_SECONDS) + result.delta : null;
}

export const RECOVERY_CODE_COUNT = 10;

// Crockford's base32: 32 symbols (5 bits a character, no modulo bias) without I, L, O, U, so a code
// read off paper cannot be misread; those letters are read as the digits they look like.
const RECOVERY_ALPHABET = '0123456789abcdefghjkmnpqrstvwxyz';

/** Ten new recovery codes, `xxxxx-xxxxx` (50 bits each; guesses meet the login lockout). */
export function newRecoveryCodes(count = RECOVERY_CODE_COUNT): string[] {
  return Array.from({ length: count }, () => {
    const chars = Array.from(randomBytes(10), (b) => RECOVERY_ALPHABET[b & 31]).join('');
    return `${chars.slice(0, 5)}-${chars.slice(5)}`;
  });
}

/** What is stored of a recovery code: the hash of its normalised form (case, spaces and dashes ignored). */
export function recoveryCodeHash(code: string): string | null {
  const normalized = code.toLowerCase().replace(/[\s-]+/g, '').replace(/[il]/g, '1').replace(/o/g, '0');
  if (normalized.length !== 10 || [...normalized].some((c) => !RECOVERY_ALPHABET.includes(c))) return null;
  return hashSecret(`rc:${normalized}`);
}

/** Whether a code the user typed is a TOTP code (digits) rather than a recovery code. */
export function looksLikeTotp(code: string): boolean {
  return /^\d{6}$/.test(code.replace(/\s+/g, ''));
}
