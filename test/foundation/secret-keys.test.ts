import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { hashSecret, newOrderedSecret, newSecret } from '../../src/shared/ids.js';

const sha256 = (value: string) => createHash('sha256').update(value, 'utf8').digest('base64url');
const RANDOM_PART = 'q8X1pV3nM5bL7kJ9hG2fD4sA6zC8xV0bN2mQ4wE6rT8';

describe('the stored key of a secret (src/shared/ids.ts: hashSecret)', () => {
  it.each([
    ['a plain secret (newSecret)', `rt_${RANDOM_PART}`, sha256(`rt_${RANDOM_PART}`)],
    ['an ordered secret: its time, then the hash of all of it', `rt_01jd8x3k2m${RANDOM_PART}`, `01jd8x3k2m${sha256(`rt_01jd8x3k2m${RANDOM_PART}`)}`],
    ['an ordered code', `ac_01jd8x3k2m${RANDOM_PART}`, `01jd8x3k2m${sha256(`ac_01jd8x3k2m${RANDOM_PART}`)}`],
    // Near misses of the ordered layout are plain secrets: the whole value hashed, no time taken from it.
    ['a time with a letter Crockford leaves out (i)', `rt_01jd8x3k2i${RANDOM_PART}`, sha256(`rt_01jd8x3k2i${RANDOM_PART}`)],
    ['a time in capitals', `rt_01JD8X3K2M${RANDOM_PART}`, sha256(`rt_01JD8X3K2M${RANDOM_PART}`)],
    ['one character short', `rt_01jd8x3k2m${RANDOM_PART.slice(1)}`, sha256(`rt_01jd8x3k2m${RANDOM_PART.slice(1)}`)],
    ['one character long', `rt_01jd8x3k2m${RANDOM_PART}x`, sha256(`rt_01jd8x3k2m${RANDOM_PART}x`)],
    ['no prefix', `01jd8x3k2m${RANDOM_PART}`, sha256(`01jd8x3k2m${RANDOM_PART}`)],
    ['a recovery-code form', `rc:01jd8x3k2m${RANDOM_PART}`, sha256(`rc:01jd8x3k2m${RANDOM_PART}`)],
    ['the empty string', '', sha256('')],
  ])('%s', (_case, secret, key) => {
    expect(hashSecret(secret)).toBe(key);
  });

  it('a different time is a different key in its hash too, not only in its time', () => {
    const a = hashSecret(`rt_01jd8x3k2m${RANDOM_PART}`);
    const b = hashSecret(`rt_01jd8x3k2n${RANDOM_PART}`);
    expect(b.slice(10)).not.toBe(a.slice(10));
  });

  it('keys of plain and ordered secrets never collide: they differ in length', () => {
    expect(hashSecret(newSecret('rt'))).toHaveLength(43);
    expect(hashSecret(newOrderedSecret('rt'))).toHaveLength(53);
  });
});

describe('ordered secrets (newOrderedSecret)', () => {
  it('carry 256 random bits after the time, in base64url, with their prefix', () => {
    const secret = newOrderedSecret('rt');
    expect(secret).toMatch(/^rt_[0-9a-hjkmnp-tv-z]{10}[A-Za-z0-9_-]{43}$/);
    expect(Buffer.from(secret.slice(13), 'base64url')).toHaveLength(32);
    expect(newOrderedSecret('rt')).not.toBe(secret);
  });

  it('are keyed in the order they were minted (a new row lands at the end of its index)', () => {
    const keys: string[] = [];
    const realNow = Date.now;
    try {
      // One millisecond apart: within one, the order of keys is the random order of their hashes.
      for (let ms = 1_732_000_000_000; ms < 1_732_000_000_005; ms++) {
        Date.now = () => ms;
        keys.push(hashSecret(newOrderedSecret('ac')));
      }
    } finally {
      Date.now = realNow;
    }
    expect([...keys].sort()).toEqual(keys);
  });

  it('encode the minting time so that later times sort after earlier ones', () => {
    const times: string[] = [];
    const realNow = Date.now;
    try {
      for (const ms of [0, 31, 32, 1_000, 1_732_000_000_000, 1_732_000_000_001, 2 ** 48]) {
        Date.now = () => ms;
        times.push(newOrderedSecret('rt').slice(3, 13));
      }
    } finally {
      Date.now = realNow;
    }
    expect(times[0]).toBe('0000000000');
    expect(times[1]).toBe('000000000z');
    expect(times[2]).toBe('0000000010');
    expect([...times].sort()).toEqual(times);
  });
});
