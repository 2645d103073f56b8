import { type KeyObject, sign, verify } from 'node:crypto';
import { errors, type JWTPayload } from 'jose';

/**
 * Our own JWTs through node:crypto KeyObjects (issue 13): ES256 access tokens and session JWTs, which
 * every bearer request verifies and every grant signs, and the signature of RS256 ID tokens. jose goes
 * through WebCrypto, whose per-call overhead (algorithm normalisation, a job object per call) cost the
 * main thread more than the arithmetic itself.
 *
 * An ES256 verify (about three times a sign's work) runs as a `crypto.verify` job on the libuv thread
 * pool: a synchronous verify was half of a bearer read's main-thread time. An ES256 sign (signEs256,
 * about 30 µs) is not worth a pool job: waking a pool thread and being woken back cost more, measured
 * under load (refresh 2.4k → 3.1k req/s on SQLite when signing inline). Signatures asked together go
 * to a worker thread in batches instead (jws-signer.ts), RS256 ones too; a lone ES256 one is made
 * inline, a lone RS256 one (0.25–0.8 ms of CPU for a 2048-bit key, by host) as a `crypto.sign` job on
 * the pool (signRs256); started through WebCrypto, that job cost the main thread about twice as much
 * (bench/RESULTS.md, finding 60).
 *
 * Only our own tokens are verified here, so the rules are narrow and fixed: compact JWS, `alg` exactly
 * ES256, `typ` as expected, a `kid` naming one of our published keys, no `crit`, a 64-byte signature;
 * then `iss`, `sub`, `iat` and `exp` required, `exp`/`nbf` with a tolerance, `aud` when asked. Failures
 * throw jose's error classes, so callers treat them exactly as jose's (any JOSEError = invalid). RS256
 * tokens (ID tokens coming back as `id_token_hint`) are verified by jose.
 */

const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');
const BASE64URL = /^[A-Za-z0-9_-]+$/;
const P1363 = 'ieee-p1363' as const;

export interface JwtHeader {
  kid: string;
  typ: string;
}

/** The JWS signing input: the encoded protected header and payload. */
export const signingInput = (alg: 'ES256' | 'RS256', header: JwtHeader, payload: JWTPayload) =>
  `${encode({ alg, typ: header.typ, kid: header.kid })}.${encode(payload)}`;

/** The compact JWS: the signing input and its signature. */
const compact = (input: string, signature: Buffer) => `${input}.${signature.toString('base64url')}`;

/** The ES256 JWT of a signing input (signingInput with 'ES256'), signed on the calling thread (JwsSigner's inline path). */
export function signEs256(input: string, key: KeyObject): string {
  return compact(input, sign('sha256', Buffer.from(input), { key, dsaEncoding: P1363 }));
}

/**
 * The RS256 JWT of a signing input (signingInput with 'RS256'): RSASSA-PKCS1-v1_5 with SHA-256,
 * node:crypto's default padding for an RSA key, on the thread pool. It is deterministic: the same input
 * and key give the same JWT, so a JWT can be stored as its input and signed again when needed once more.
 */
export function signRs256(input: string, key: KeyObject): Promise<string> {
  return new Promise((resolve, reject) =>
    sign('sha256', Buffer.from(input), key, (error, signature) => (error ? reject(error) : resolve(compact(input, signature)))),
  );
}

/** Whether `signature` is `key`'s over `input`, checked on the thread pool; any failure to check is a no. */
function signatureValid(input: string, signature: Buffer, key: KeyObject): Promise<boolean> {
  return new Promise((resolve) =>
    verify('sha256', Buffer.from(input), { key, dsaEncoding: P1363 }, signature, (error, ok) => resolve(!error && ok)),
  );
}

/** A token whose signature was checked: what it says and the key that signed it. */
interface CheckedToken {
  kid: string;
  key: KeyObject;
  header: Readonly<Record<string, unknown>>;
  payload: Readonly<JWTPayload>;
}

/**
 * Tokens whose signature this process has already checked, by their exact text. An app sends the same
 * access token with every call until it expires, and the P-256 verification was the largest cost of a
 * bearer read (bench/RESULTS.md, "http"). Only the signature check is remembered: the header and claim
 * rules run again on every call, and an entry counts only while its `kid` still names the very key
 * object that checked it (a key reload or a retired key leaving the JWKS makes it a miss). Only tokens
 * that passed every rule get in, so a client cannot fill it with what it made up; the oldest entry
 * leaves first.
 */
export class CheckedSignatures {
  private readonly tokens = new Map<string, CheckedToken>();
  constructor(private readonly capacity: number) {}

  recall(token: string): CheckedToken | undefined {
    return this.tokens.get(token);
  }

  /** Adds or replaces (a token checked again under a reloaded key) the entry of `token`. */
  remember(token: string, checked: CheckedToken): void {
    this.tokens.delete(token);
    if (this.tokens.size >= this.capacity) this.tokens.delete(this.tokens.keys().next().value!);
    this.tokens.set(token, checked);
  }

  get size(): number {
    return this.tokens.size;
  }
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

function checkHeader(header: Readonly<Record<string, unknown>>, options: Es256VerifyOptions): void {
  if (header.alg !== 'ES256') throw new errors.JOSEAlgNotAllowed('"alg" (Algorithm) Header Parameter value not allowed');
  if (header.crit !== undefined || header.b64 !== undefined) throw new errors.JWSInvalid('unsupported header parameter');
  if (typeof header.typ !== 'string' || header.typ.toLowerCase() !== options.typ.toLowerCase()) {
    throw new errors.JWTClaimValidationFailed('unexpected "typ" JWT header value', {}, 'typ', 'check_failed');
  }
}

function checkClaims(payload: Readonly<JWTPayload>, options: Es256VerifyOptions): JWTPayload {
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

/**
 * Verifies one of our ES256 JWTs; returns its claims (frozen: `checked` may hand the same object out
 * again) or throws a jose error. With `checked`, a token whose signature was checked before skips only
 * that check.
 */
export async function verifyEs256(token: string, options: Es256VerifyOptions, checked?: CheckedSignatures): Promise<JWTPayload> {
  const known = checked?.recall(token);
  if (known && options.keyFor(known.kid) === known.key) {
    checkHeader(known.header, options);
    return checkClaims(known.payload, options);
  }
  const parts = token.split('.');
  if (parts.length !== 3 || parts.some((p) => p.length === 0)) throw new errors.JWSInvalid('not a compact JWS');
  const [headerPart, payloadPart, signaturePart] = parts as [string, string, string];
  const header = Object.freeze(parseSegment(headerPart));
  checkHeader(header, options);
  const kid = header.kid;
  const key = typeof kid === 'string' ? options.keyFor(kid) : undefined;
  if (!key) throw new errors.JWKSNoMatchingKey();
  if (!BASE64URL.test(signaturePart)) throw new errors.JWSInvalid('signature is not base64url');
  const signature = Buffer.from(signaturePart, 'base64url');
  if (signature.length !== 64 || !(await signatureValid(`${headerPart}.${payloadPart}`, signature, key))) {
    throw new errors.JWSSignatureVerificationFailed();
  }
  const payload = Object.freeze(parseSegment(payloadPart) as JWTPayload);
  checkClaims(payload, options);
  checked?.remember(token, { kid: kid as string, key, header, payload });
  return payload;
}
