import { describe, expect, it } from 'vitest';
import { newId, newSecret, randomBytesPooled } from '../../src/shared/ids.js';

describe('pooled random bytes (src/shared/ids.ts)', () => {
  it('hands out the length asked for, never the same bytes twice, across many refills of the pool', () => {
    const seen = new Set<string>();
    // 13 bytes a draw does not divide 4096: draws straddle the refills.
    for (let i = 0; i < 2000; i++) {
      const bytes = randomBytesPooled(13);
      expect(bytes.length).toBe(13);
      seen.add(bytes.toString('hex'));
    }
    expect(seen.size).toBe(2000);
  });

  it('looks uniform: every byte value occurs, none wildly more often than the others', () => {
    const counts = new Array<number>(256).fill(0);
    for (let i = 0; i < 400; i++) for (const b of randomBytesPooled(64)) counts[b]! += 1;
    // 25,600 bytes: 100 expected per value; a fair source stays far inside these bounds.
    expect(Math.min(...counts)).toBeGreaterThan(40);
    expect(Math.max(...counts)).toBeLessThan(170);
  });

  it('returns a copy: changing it changes nothing later draws return', () => {
    const a = randomBytesPooled(32);
    a.fill(0);
    const b = randomBytesPooled(32);
    expect(b.equals(Buffer.alloc(32))).toBe(false);
  });

  it('refuses more than one pool at once', () => {
    expect(() => randomBytesPooled(4097)).toThrow(RangeError);
  });

  it('secrets and ids keep their form', () => {
    expect(newSecret('rt')).toMatch(/^rt_[A-Za-z0-9_-]{43}$/);
    expect(newId('grt')).toMatch(/^grt_[0-9a-z]{26}$/);
  });
});
