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
 * The compact JWS of a signing input for `alg`, signed with `key`. ES256 (IEEE P1363 signature, as JWS
 * uses) is signed on the calling thread: a grant's rotation waits for its access token, and signatures
 * finishing one by one on the thread pool split the grants of one turn over several SQLite commits
 * (docs/adr/0006-node-crypto-jwt-signing.md). RS256 (RSASSA-PKCS1-v1_5, SHA-256), several times dearer
 * and never waited for by a write, is a job on the thread pool. RS256 is deterministic: the same input
 * and key give the same JWT, so a JWT can be stored as its input and signed again when needed.
 */
export function signJws(alg: SigningAlg, input: string, key: KeyObject): Promise<string> {
  if (alg === 'ES256') {
    try {
      return Promise.resolve(`${input}.${sign('sha256', Buffer.from(input), { key, dsaEncoding: 'ieee-p1363' }).toString('base64url')}`);
    } catch (error) {
      return Promise.reject(error);
    }
  }
  return new Promise<string>((resolve, reject) =>
    sign('sha256', Buffer.from(input), key, (error, signature) => (error ? reject(error) : resolve(`${input}.${signature.toString('base64url')}`))),
  );
}
