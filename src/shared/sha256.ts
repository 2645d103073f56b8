import * as crypto from 'node:crypto';

/**
 * node:crypto's one-shot `hash` where the runtime has it (Node ≥ 20.12), which makes no Hash object per
 * call; the Node 20 releases before 20.12, which `engines` allows, take createHash.
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
