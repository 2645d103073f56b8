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
 * The compact JWS of a signing input for `alg`, signed with `key`. ES256 (~30 µs) is signed on this
 * thread with the signature in the IEEE P1363 form JWS uses; RS256 (RSASSA-PKCS1-v1_5, SHA-256,
 * 0.25–0.8 ms) as a job on the thread pool. RS256 is deterministic: the same input and key give the
 * same JWT, so a JWT can be stored as its input and signed again when needed.
 */
export async function signJws(alg: SigningAlg, input: string, key: KeyObject): Promise<string> {
  const data = Buffer.from(input);
  const signature =
    alg === 'ES256'
      ? sign('sha256', data, { key, dsaEncoding: 'ieee-p1363' })
      : await new Promise<Buffer>((resolve, reject) => sign('sha256', data, key, (error, made) => (error ? reject(error) : resolve(made))));
  return `${input}.${signature.toString('base64url')}`;
}
