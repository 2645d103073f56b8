import { type KeyObject, sign, verify } from 'node:crypto';
import { errors, type JWTPayload } from 'jose';

/**
 * ES256 JWTs through node:crypto (issue 13): the access tokens and session JWTs that every bearer
 * request verifies and every grant signs. jose goes through WebCrypto, whose per-call overhead
 * (algorithm normalisation, a job on the thread pool) cost more than the P-256 arithmetic itself; a
 * synchronous `crypto.sign`/`crypto.verify` on an imported KeyObject takes tens of microseconds.
 *
 * Only our own tokens pass here, so the rules are narrow and fixed: compact JWS, `alg` exactly ES256,
 * `typ` as expected, a `kid` naming one of our published keys, no `crit`, a 64-byte signature; then
 * `iss`, `sub`, `iat` and `exp` required, `exp`/`nbf` with a tolerance, `aud` when asked. Failures
 * throw jose's error classes, so callers treat them exactly as jose's (any JOSEError = invalid).
 * RS256 (ID tokens) stays with jose: an RSA signature is slow enough to belong off the main thread.
 */

const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const BASE64URL = /^[A-Za-z0-9_-]+$/;

export function signEs256(payload: JWTPayload, header: { kid: string; typ: string }, key: KeyObject): string {
  const input = `${encode({ alg: 'ES256', typ: header.typ, kid: header.kid })}.${encode(payload)}`;
  const signature = sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' });
  return `${input}.${signature.toString('base64url')}`;
}

export interface Es256VerifyOptions {
  /** The public key published under `kid`, or undefined when there is none. */
  keyFor(kid: string): KeyObject | undefined;
  issuer: string;
  typ: string;
  audience?: string;
  /** Seconds since the epoch. */
  now: number;
  /** Seconds of clock skew allowed on `exp` and `nbf`. */
  tolerance: number;
}

function parseSegment(segment: string): Record<string, unknown> {
  if (!BASE64URL.test(segment)) throw new errors.JWTInvalid('segment is not base64url');
  let value: unknown;
  try {
    value = JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch {
    throw new errors.JWTInvalid('segment is not JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) throw new errors.JWTInvalid('segment is not a JSON object');
  return value as Record<string, unknown>;
}

/** Verifies one of our ES256 JWTs; returns its claims or throws a jose error. */
export function verifyEs256(token: string, options: Es256VerifyOptions): JWTPayload {
  const parts = token.split('.');
  if (parts.length !== 3 || parts.some((p) => p.length === 0)) throw new errors.JWSInvalid('not a compact JWS');
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = parseSegment(headerPart);
  if (header.alg !== 'ES256') throw new errors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
  if (header.crit !== undefined || header.b64 !== undefined) throw new errors.JWSInvalid('unsupported header parameter');
  if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== options.typ.toLowerCase()) {
    throw new errors.JWTClaimValidationFailed('unexpected "typ" JWT header value', {}, 'typ', 'check_failed');
  }
  const key = typeof header.kid === 'string' ? options.keyFor(header.kid) : undefined;
  if (!key) throw new errors.JWKSNoMatchingKey();
  if (!BASE64URL.test(signaturePart)) throw new errors.JWSInvalid('signature is not base64url');
  const signature = Buffer.from(signaturePart, 'base64url');
  if (signature.length !== 64 || !verify('sha256', Buffer.from(`${headerPart}.${payloadPart}`), { key, dsaEncoding: 'ieee-p1363' }, signature)) {
    throw new errors.JWSSignatureVerificationFailed();
  }

  const payload = parseSegment(payloadPart) as JWTPayload;
  const fail = (claim: string, message: string) => new errors.JWTClaimValidationFailed(message, payload, claim, 'check_failed');
  for (const claim of ['iat', 'exp'] as const) if (typeof payload[claim] !== 'number') throw fail(claim, `"${claim}" claim must be a number`);
  if (typeof payload.sub !== 'string') throw fail('sub', '"sub" claim must be a string');
  if (payload.iss !== options.issuer) throw fail('iss', 'unexpected "iss" claim value');
  if (options.audience !== undefined) {
    const aud = payload.aud;
    if (!(aud === options.audience || (Array.isArray(aud) && aud.includes(options.audience)))) throw fail('aud', 'unexpected "aud" claim value');
  }
  if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > options.now + options.tolerance)) throw fail('nbf', '"nbf" claim timestamp check failed');
  if (payload.exp! <= options.now - options.tolerance) throw new errors.JWTExpired('"exp" claim timestamp check failed', payload, 'exp', 'check_failed');
  return payload;
}
