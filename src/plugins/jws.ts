import { type KeyObject, sign } from 'node:crypto';
import type { JWTPayload } from 'jose';

/**
 * Our JWT signatures, made with node:crypto over the compact JWS signing input (docs/adr/0006-node-crypto-jwt-signing.md).
 * Verification is jose's (KeyStore.verify).
 */

export type SigningAlg = 'ES256' | 'RS256';

const encode = (value: object) => Buffer.from(JSON.stringify(value)).toString('base64url');

/** The JWS signing input: the encoded protected header and payload. */
export const signingInput = (alg: SigningAlg, header: { kid: string; typ: string }, payload: JWTPayload) =>
  `${encode({ alg, typ: header.typ, kid: header.kid })}.${encode(payload)}`;

/**
 * The compact JWS of a signing input for `alg`, signed with `key` as a job on the thread pool, so the
 * event loop goes on meanwhile (docs/adr/0006-node-crypto-jwt-signing.md). ES256 gives the signature in
 * the IEEE P1363 form JWS uses; RS256 (RSASSA-PKCS1-v1_5, SHA-256) is deterministic: the same input and
 * key give the same JWT, so a JWT can be stored as its input and signed again when needed.
 */
export function signJws(alg: SigningAlg, input: string, key: KeyObject): Promise<string> {
  const options = alg === 'ES256' ? { key, dsaEncoding: 'ieee-p1363' as const } : key;
  return new Promise<string>((resolve, reject) =>
    sign('sha256', Buffer.from(input), options, (error, signature) => (error ? reject(error) : resolve(`${input}.${signature.toString('base64url')}`))),
  );
}
