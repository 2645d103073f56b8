import { createCipheriv, createDecipheriv, createHmac, hkdfSync, randomBytes } from 'node:crypto';

/**
 * Symmetric encryption at rest (AES-256-GCM) under a key derived from SECRET_KEY with HKDF-SHA256.
 * Each purpose gets its own derived key, so a ciphertext for one use cannot be replayed into another.
 */
export class SecretBox {
  private readonly key: Buffer;

  constructor(secretKey: string, purpose: string) {
    this.key = Buffer.from(hkdfSync('sha256', secretKey, 'gatehouse', `gatehouse:${purpose}`, 32));
  }

  /**
   * `iv`: 12 random bytes never used before, drawn by the caller together with its other random values
   * (docs/adr/0014-one-random-draw-per-token-response.md); drawn here when not given.
   */
  seal(plaintext: string | Uint8Array, iv: Uint8Array = randomBytes(12)): string {
    if (iv.length !== 12) throw new Error('a sealed value takes a 12-byte IV');
    const cipher = createCipheriv('aes-256-gcm', this.key, iv);
    const body = Buffer.concat([typeof plaintext === 'string' ? cipher.update(plaintext, 'utf8') : cipher.update(plaintext), cipher.final()]);
    return ['v1', Buffer.from(iv.buffer, iv.byteOffset, 12).toString('base64url'), body.toString('base64url'), cipher.getAuthTag().toString('base64url')].join('.');
  }

  open(sealed: string): string {
    return this.openBytes(sealed).toString('utf8');
  }

  openBytes(sealed: string): Buffer {
    const [version, iv, body, tag] = sealed.split('.');
    if (version !== 'v1' || !iv || body === undefined || !tag) throw new Error('sealed value has an unknown format');
    const decipher = createDecipheriv('aes-256-gcm', this.key, Buffer.from(iv, 'base64url'));
    decipher.setAuthTag(Buffer.from(tag, 'base64url'));
    return Buffer.concat([decipher.update(Buffer.from(body, 'base64url')), decipher.final()]);
  }
}

/**
 * How a mailed code is stored: HMAC-SHA256 of `id:code` under a key derived from SECRET_KEY for
 * `purpose`, so six digits cannot be found from a database dump by trying all million of them, and a
 * code stored for one row or purpose does not match another.
 */
export function codeHasher(secretKey: string, purpose: string): (id: string, code: string) => string {
  const key = Buffer.from(hkdfSync('sha256', secretKey, 'gatehouse', `gatehouse:${purpose}`, 32));
  return (id, code) => createHmac('sha256', key).update(`${id}:${code}`).digest('base64url');
}
