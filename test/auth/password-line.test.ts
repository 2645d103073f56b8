import { describe, expect, it } from 'vitest';
import { passwordChecksAtOnce } from '../../src/auth/passwords.js';

// src/auth/passwords.ts: one argon2 computation per core plus one, and always a thread of libuv's pool
// left for ES256 verifications, RS256 signatures and file reads (docs/adr/0009-password-line.md).
describe('passwordChecksAtOnce', () => {
  it.each([
    // The pool the preload starts (cores + 2, at least 4): the line is cores + 1.
    { cores: 1, poolThreads: 4, expected: 2 },
    { cores: 2, poolThreads: 4, expected: 3 },
    { cores: 3, poolThreads: 5, expected: 4 },
    { cores: 8, poolThreads: 10, expected: 9 },
    { cores: 64, poolThreads: 66, expected: 65 },
    // libuv's default pool of 4 on a larger host (no preload): one thread stays free.
    { cores: 3, poolThreads: 4, expected: 3 },
    { cores: 8, poolThreads: 4, expected: 3 },
    // An operator's pool larger than needed does not lengthen the line past cores + 1.
    { cores: 2, poolThreads: 16, expected: 3 },
    // A pool of one or two threads: still one computation at a time, never none.
    { cores: 8, poolThreads: 2, expected: 1 },
    { cores: 8, poolThreads: 1, expected: 1 },
  ])('$cores cores, $poolThreads pool threads: $expected at once', ({ cores, poolThreads, expected }) => {
    expect(passwordChecksAtOnce(cores, poolThreads)).toBe(expected);
  });
});
