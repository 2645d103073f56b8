import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The bundled list of common and breached passwords (docs/guides/password-policy.md, "Breached
 * passwords"), kept as a Bloom filter built by scripts/build-breached-passwords.ts and read on the
 * first check (the server never pays for it until a password is chosen). A password is looked up in
 * NFC, lower case: `Password1` is as guessable as `password1`.
 */

/** The share of passwords in no list that the filter still reports as listed. */
export const BREACHED_FALSE_POSITIVE_RATE = 1e-5;

const MAGIC = 'GHBF';
const HEADER = 12;

export interface Bloom {
  bits: number;
  hashes: number;
  data: Uint8Array;
}

export const breachedKey = (password: string): string => password.normalize('NFC').toLowerCase();

/** The filter's bit positions of a key: double hashing over two 32-bit halves of its SHA-256. */
function positions(key: string, bits: number, hashes: number): number[] {
  const digest = createHash('sha256').update(key, 'utf8').digest();
  const h1 = digest.readUInt32BE(0);
  const h2 = digest.readUInt32BE(4) | 1;
  const out: number[] = [];
  // h1 + i·h2 < 2^53 for any i below 2^21: exact in a double.
  for (let i = 0; i < hashes; i++) out.push((h1 + i * (h2 >>> 0)) % bits);
  return out;
}

/** The smallest filter for `keys` at `rate` (m = −n·ln p / ln²2 bits, k = m/n·ln 2 hashes). */
export function buildBloom(keys: readonly string[], rate: number): Bloom {
  const bits = Math.ceil((-keys.length * Math.log(rate)) / Math.LN2 ** 2 / 8) * 8;
  const hashes = Math.max(1, Math.round((bits / keys.length) * Math.LN2));
  const data = new Uint8Array(bits / 8);
  for (const key of keys) for (const p of positions(key, bits, hashes)) data[p >>> 3]! |= 1 << (p & 7);
  return { bits, hashes, data };
}

export function bloomHas(bloom: Bloom, key: string): boolean {
  return positions(key, bloom.bits, bloom.hashes).every((p) => (bloom.data[p >>> 3]! & (1 << (p & 7))) !== 0);
}

/** `GHBF`, the hash count and the bit count (uint32 big-endian), then the bits. */
export function serializeBloom(bloom: Bloom): Buffer {
  const header = Buffer.alloc(HEADER);
  header.write(MAGIC, 0, 'latin1');
  header.writeUInt32BE(bloom.hashes, 4);
  header.writeUInt32BE(bloom.bits, 8);
  return Buffer.concat([header, bloom.data]);
}

export function parseBloom(file: Buffer): Bloom {
  if (file.subarray(0, 4).toString('latin1') !== MAGIC) throw new Error('not a Gatehouse Bloom filter');
  const hashes = file.readUInt32BE(4);
  const bits = file.readUInt32BE(8);
  if (file.length !== HEADER + bits / 8) throw new Error('Bloom filter file has the wrong length');
  return { bits, hashes, data: new Uint8Array(file.buffer, file.byteOffset + HEADER, bits / 8) };
}

let bundled: Bloom | undefined;

function bundledBloom(): Bloom {
  if (!bundled) {
    // Beside this module (tsx, tests) or in the source tree (a compiled build run from the project root).
    const beside = fileURLToPath(new URL('./breached-passwords.bloom', import.meta.url));
    bundled = parseBloom(readFileSync(existsSync(beside) ? beside : resolve('src/sign-in/breached-passwords.bloom')));
  }
  return bundled;
}

/** Is this password in the bundled list (or one of the rare false positives)? */
export function isBundledBreachedPassword(password: string): boolean {
  return bloomHas(bundledBloom(), breachedKey(password));
}
