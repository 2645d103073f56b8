import { calculateJwkThumbprint, decodeProtectedHeader, EmbeddedJWK, errors as joseErrors, type JWK, jwtVerify } from 'jose';
import { sha256 } from '../shared/sha256.js';

/**
 * The check of one DPoP proof (RFC 9449 §4.3, docs/reference/oauth.md "DPoP"), pure: everything it
 * judges is in its arguments; the replay cache of `jti` and the nonce's secret live with the caller
 * (tokens/dpop.ts). Table-tested in test/dpop/proof.test.ts.
 */

/** Asymmetric algorithms only: a proof shows possession of a private key, so HS* and `none` never pass. */
export const DPOP_ALGS = ['ES256', 'ES384', 'ES512', 'EdDSA', 'Ed25519', 'RS256', 'RS384', 'RS512', 'PS256', 'PS384', 'PS512'] as const;

/** How far in the past a proof's `iat` may be (seconds); the replay cache keeps each `jti` this long plus FUTURE_SKEW_S. */
export const PROOF_MAX_AGE_S = 120;
/** How far ahead of our clock a proof's `iat` may be (seconds): the client's clock may run fast. */
export const PROOF_FUTURE_SKEW_S = 60;

/** Members only a private (or symmetric) JWK has (RFC 7518 §6.2.2, §6.3.2, §6.4.1; RFC 8037 §2). */
const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];
const COMPACT_JWS = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;
const MAX_PROOF_LENGTH = 8192;

export interface ProofExpectations {
  /** The request's method (`htm`). */
  method: string;
  /** Our public URL of the endpoint, under the configured BASE_URL, without query or fragment (`htu`). */
  url: string;
  /** Now, in epoch seconds (the injectable clock). */
  now: number;
  /** At a resource endpoint: the access token the proof must name in `ath`. */
  accessToken?: string;
  /** When server nonces are on: whether a nonce is one this server handed out recently. */
  acceptsNonce?: (nonce: string) => boolean;
}

export type ProofFailure = 'invalid_dpop_proof' | 'use_dpop_nonce';

export type ProofResult =
  | { ok: true; jkt: string; jti: string; iat: number }
  | { ok: false; error: ProofFailure; reason: string };

const fail = (reason: string, error: ProofFailure = 'invalid_dpop_proof'): ProofResult => ({ ok: false, error, reason });

/** `htu` as compared (RFC 9449 §4.3 item 9): the URL without query and fragment, normalised by the WHATWG parser. */
export function normaliseHtu(value: string): string | undefined {
  try {
    const url = new URL(value);
    if (url.protocol !== 'https:' && url.protocol !== 'http:') return undefined;
    return `${url.origin}${url.pathname}`;
  } catch {
    return undefined;
  }
}

/** base64url(SHA-256(access token)), the `ath` claim (RFC 9449 §4.2). */
export const accessTokenHash = (accessToken: string): string => sha256(accessToken, 'base64url');

/** Checks a DPoP proof against the request it came with; never throws. */
export async function checkDpopProof(proof: string, expect: ProofExpectations): Promise<ProofResult> {
  if (proof.length > MAX_PROOF_LENGTH || !COMPACT_JWS.test(proof)) return fail('not a compact JWS');
  let header: ReturnType<typeof decodeProtectedHeader>;
  try {
    header = decodeProtectedHeader(proof);
  } catch {
    return fail('undecodable header');
  }
  if (header.typ !== 'dpop+jwt') return fail('typ is not dpop+jwt');
  if (typeof header.alg !== 'string' || !(DPOP_ALGS as readonly string[]).includes(header.alg)) return fail('algorithm not allowed');
  const jwk = header.jwk as JWK | undefined;
  if (!jwk || typeof jwk !== 'object' || Array.isArray(jwk)) return fail('no jwk');
  if (PRIVATE_MEMBERS.some((member) => Object.hasOwn(jwk, member))) return fail('jwk holds private key material');

  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(proof, EmbeddedJWK, { typ: 'dpop+jwt', algorithms: [...DPOP_ALGS], currentDate: new Date(expect.now * 1000) }));
  } catch (error) {
    if (error instanceof joseErrors.JOSEError || error instanceof TypeError) return fail(`signature or claims rejected (${(error as Error).name})`);
    throw error;
  }

  const { jti, htm, htu, iat, ath, nonce } = payload;
  if (typeof jti !== 'string' || jti.length < 8 || jti.length > 256) return fail('jti missing or malformed');
  if (htm !== expect.method) return fail('htm does not match the request method');
  if (typeof htu !== 'string' || normaliseHtu(htu) === undefined || normaliseHtu(htu) !== normaliseHtu(expect.url)) return fail('htu does not match the endpoint');
  if (typeof iat !== 'number' || !Number.isFinite(iat)) return fail('iat missing');
  if (iat < expect.now - PROOF_MAX_AGE_S || iat > expect.now + PROOF_FUTURE_SKEW_S) return fail('iat outside the accepted window');
  if (expect.accessToken !== undefined) {
    if (typeof ath !== 'string') return fail('ath missing');
    if (ath !== accessTokenHash(expect.accessToken)) return fail('ath does not match the access token');
  }
  if (expect.acceptsNonce && (typeof nonce !== 'string' || !expect.acceptsNonce(nonce))) return fail('nonce missing or stale', 'use_dpop_nonce');

  return { ok: true, jkt: await calculateJwkThumbprint(jwk, 'sha256'), jti, iat };
}
