import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { sha256, sha256Bytes } from '../../src/shared/sha256.js';

// The SHA-256 every stored secret key, PKCE challenge and replay key is made of (src/shared/sha256.ts):
// known vectors (FIPS 180-2), and the same bytes as node:crypto's Hash object for non-ASCII text.
describe('sha256', () => {
  it.each([
    ['', 'e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855', '47DEQpj8HBSa-_TImW-5JCeuQeRkm5NMpJWZG3hSuFU'],
    ['abc', 'ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad', 'ungWv48Bz-pBQUDeXa4iI7ADYaOWF3qctBD_YfIAFa0'],
  ])('hashes %j to its known digest', (input, hex, base64url) => {
    expect(sha256(input, 'hex')).toBe(hex);
    expect(sha256(input, 'base64url')).toBe(base64url);
    expect(sha256Bytes(input).toString('hex')).toBe(hex);
  });

  it.each(['naïve café', '日本語のパスワード', 'emoji 🔑 key', 'rt_01kbq3n5v7AbCdEfGhIjKlMnOpQrStUvWxYz0123456789-_aBcDeF'])(
    'hashes %j as UTF-8, as the Hash object does',
    (input) => {
      expect(sha256(input, 'base64url')).toBe(createHash('sha256').update(input, 'utf8').digest('base64url'));
      expect(sha256Bytes(input).equals(createHash('sha256').update(input, 'utf8').digest())).toBe(true);
    },
  );
});
