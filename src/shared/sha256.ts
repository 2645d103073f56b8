import * as crypto from 'node:crypto';

/**
 * node:crypto's one-shot `hash` (Node ≥ 20.12): ~0.3 µs for a token's SHA-256 against ~0.8 µs for
 * createHash().update().digest(), which makes a Hash object per call, and a refresh grant hashes three
 * or four values (bench/RESULTS.md, finding 80). Undefined on the Node 20 releases before 20.12, which
 * `engines` allows: those take the Hash object.
 */
const oneShot: typeof crypto.hash | undefined = crypto.hash;

/** SHA-256 of a string (UTF-8), encoded. */
export function sha256(value: string, encoding: 'base64url' | 'hex'): string {
  return oneShot ? oneShot('sha256', value, encoding) : crypto.createHash('sha256').update(value, 'utf8').digest(encoding);
}

/** SHA-256 of a string (UTF-8), as bytes. */
export function sha256Bytes(value: string): Buffer {
  return oneShot ? oneShot('sha256', value, 'buffer') : crypto.createHash('sha256').update(value, 'utf8').digest();
}
