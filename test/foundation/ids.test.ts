import { describe, expect, it } from 'vitest';
import { hashSecret, newId, newOrderedSecret, newSecret } from '../../src/shared/ids.js';

describe('secrets and ids (src/shared/ids.ts)', () => {
  it('keep their form', () => {
    expect(newSecret('rt')).toMatch(/^rt_[A-Za-z0-9_-]{43}$/);
    expect(newOrderedSecret('rt')).toMatch(/^rt_[0-9a-z]{10}[A-Za-z0-9_-]{43}$/);
    expect(newId('grt')).toMatch(/^grt_[0-9a-z]{26}$/);
  });

  it('never repeat, and ids minted later sort after earlier ones', () => {
    const secrets = new Set(Array.from({ length: 2000 }, () => newSecret('rt')));
    expect(secrets.size).toBe(2000);
    const ids = Array.from({ length: 2000 }, () => newId('grt'));
    expect(new Set(ids).size).toBe(2000);
    expect([...ids].sort()).toEqual(ids);
  });

  it('an ordered secret is stored under a key that starts with its time', () => {
    const secret = newOrderedSecret('rt');
    expect(hashSecret(secret).startsWith(secret.slice(3, 13))).toBe(true);
  });
});
