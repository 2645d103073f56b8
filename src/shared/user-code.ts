import { randomInt } from 'node:crypto';
import { sha256 } from './sha256.js';

/**
 * User codes of the device authorization grant (RFC 8628 §6.1, docs/reference/oauth.md#device-authorization-grant-rfc-8628):
 * 8 characters from 20 consonants without look-alikes or vowels (no words spelt by accident), about
 * 34.5 bits, shown as `XXXX-XXXX`; typed back in any case, with or without dashes and spaces.
 */
export const USER_CODE_ALPHABET = 'BCDFGHJKLMNPQRSTVWXZ';
export const USER_CODE_LENGTH = 8;

/** A new user code, uniformly random, in its canonical form (8 capitals, no dash). */
export function newUserCode(): string {
  let code = '';
  for (let i = 0; i < USER_CODE_LENGTH; i++) code += USER_CODE_ALPHABET[randomInt(USER_CODE_ALPHABET.length)];
  return code;
}

/** The canonical form of what a person typed, or null when it cannot be a user code (no look-up is made). */
export function normalizeUserCode(input: string): string | null {
  if (input.length > 40) return null;
  const code = input.replace(/[\s-]/g, '').toUpperCase();
  if (code.length !== USER_CODE_LENGTH) return null;
  for (const c of code) if (!USER_CODE_ALPHABET.includes(c)) return null;
  return code;
}

/** `XXXX-XXXX`, as the device and the page show it. */
export function formatUserCode(code: string): string {
  return `${code.slice(0, 4)}-${code.slice(4)}`;
}

/** How a user code is stored and looked up: only its hash. */
export function userCodeHash(code: string): string {
  return sha256(`user_code:${code}`, 'base64url');
}
