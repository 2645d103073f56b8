import { timingSafeEqual } from 'node:crypto';
import { sha256 } from '../shared/sha256.js';

/**
 * PKCE (RFC 7636), S256 only (docs/security/checklist.md#pkce). Pure functions.
 * - verifier: 43–128 characters of the unreserved set `[A-Za-z0-9-._~]` (RFC 7636 §4.1);
 * - challenge: BASE64URL(SHA-256(verifier)) without padding, hence exactly 43 characters.
 */

const VERIFIER = /^[A-Za-z0-9\-._~]{43,128}$/;
const CHALLENGE = /^[A-Za-z0-9_-]{43}$/;

export const isValidVerifier = (verifier: string): boolean => VERIFIER.test(verifier);
export const isValidChallenge = (challenge: string): boolean => CHALLENGE.test(challenge);

export function s256(verifier: string): string {
  // The verifier is ASCII (isValidVerifier), so its UTF-8 bytes are RFC 7636's ASCII ones.
  return sha256(verifier, 'base64url');
}

/** True when `verifier` is well-formed and hashes to `challenge` (compared in constant time). */
export function verifyPkce(verifier: string, challenge: string): boolean {
  if (!isValidVerifier(verifier) || !isValidChallenge(challenge)) return false;
  return timingSafeEqual(Buffer.from(s256(verifier)), Buffer.from(challenge));
}

export type ChallengeCheck = { ok: true; challenge: string | null } | { ok: false; reason: string };

/**
 * Checks the PKCE parameters of an authorization request. `required` is true for public apps.
 * `plain`, a missing method (which RFC 7636 defaults to plain) and malformed challenges are refused.
 */
export function checkChallenge(challenge: string | undefined, method: string | undefined, required: boolean): ChallengeCheck {
  if (challenge === undefined || challenge === '') {
    if (method !== undefined && method !== '') return { ok: false, reason: 'code_challenge_method without code_challenge' };
    return required ? { ok: false, reason: 'code_challenge (S256) is required' } : { ok: true, challenge: null };
  }
  if (method === undefined || method === '') return { ok: false, reason: 'code_challenge_method is required and must be S256' };
  if (method !== 'S256') return { ok: false, reason: 'only code_challenge_method=S256 is supported' };
  if (!isValidChallenge(challenge)) return { ok: false, reason: 'code_challenge must be 43 base64url characters' };
  return { ok: true, challenge };
}
