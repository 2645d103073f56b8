import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bloomHas, buildBloom, isBundledBreachedPassword, parseBloom, serializeBloom } from '../../src/sign-in/breached-passwords.js';
import { hibpRangeClient } from '../../src/sign-in/hibp.js';
import { DEFAULT_PASSWORD_POLICY, characterClassCount, effectiveMinLength, passwordExpired, passwordProblem, type PasswordPolicy } from '../../src/sign-in/password-policy.js';

// docs/guides/password-policy.md
const policy = (p: Partial<PasswordPolicy> = {}): PasswordPolicy => ({ ...DEFAULT_PASSWORD_POLICY, ...p });
const facts = { email: 'ada@example.com', breached: false };

describe('passwordProblem', () => {
  it.each([
    ['short', policy(), 8, facts, 'too_short'],
    ['eightchr', policy(), 8, facts, null],
    ['eightchr', policy({ minLength: 12 }), 8, facts, 'too_short'],
    ['twelve chars', policy({ minLength: 12 }), 8, facts, null],
    ['eightchr', policy(), 10, facts, 'too_short'], // the platform floor wins over a lower app minimum
    ['x'.repeat(129), policy(), 8, facts, 'too_long'],
    ['ADA@example.com', policy(), 8, facts, 'equals_email'],
    ['alllowercase', policy({ characterClasses: 2 }), 8, facts, 'character_classes'],
    ['lower and 1 digit', policy({ characterClasses: 3 }), 8, facts, null], // lower, digit, other (space)
    ['alllowercase', policy(), 8, { ...facts, breached: true }, 'common'],
    ['a fine passphrase', policy(), 8, { ...facts, reused: true }, 'reused'],
    ['a fine passphrase', policy(), 8, facts, null],
    ['日本語のパスワード', policy(), 8, facts, null], // 9 code points
  ] as const)('%s under %o (floor %i) → %s', (password, p, floor, f, expected) => {
    expect(passwordProblem(password, p, floor, f)).toBe(expected);
  });

  it('counts character classes and caps the minimum length', () => {
    expect(characterClassCount('aB3$')).toBe(4);
    expect(characterClassCount('abc')).toBe(1);
    expect(effectiveMinLength({ minLength: 4 }, 8)).toBe(8);
    expect(effectiveMinLength({ minLength: 200 }, 8)).toBe(128);
  });

  it('expires a password only with a maximum age', () => {
    const now = 1_000_000_000;
    expect(passwordExpired(now - 10 * 86400, policy(), now)).toBe(false);
    expect(passwordExpired(now - 10 * 86400, policy({ maxAgeDays: 10 }), now)).toBe(true);
    expect(passwordExpired(now - 9 * 86400, policy({ maxAgeDays: 10 }), now)).toBe(false);
    // A password never set here (an imported hash) is one no policy checked: any maximum age asks for a new one.
    expect(passwordExpired(null, policy({ maxAgeDays: 3650 }), now)).toBe(true);
    expect(passwordExpired(null, policy(), now)).toBe(false);
  });
});

describe('the bundled breach list', () => {
  it('knows common and breached passwords, case-insensitively, and not a random one', () => {
    for (const pw of ['password', 'Password1', '12345678', 'iloveyou', 'qwertyuiop', 'trustno1']) expect(isBundledBreachedPassword(pw), pw).toBe(true);
    expect(isBundledBreachedPassword('tabby-violin-harbour-42')).toBe(false);
  });

  it('round-trips a filter and holds its false-positive rate', () => {
    const keys = Array.from({ length: 5000 }, (_, i) => `key-${i}`);
    const bloom = parseBloom(serializeBloom(buildBloom(keys, 1e-3)));
    expect(keys.every((k) => bloomHas(bloom, k))).toBe(true);
    const misses = Array.from({ length: 20000 }, (_, i) => `other-${i}`).filter((k) => bloomHas(bloom, k)).length;
    expect(misses / 20000).toBeLessThan(3e-3);
  });
});

describe('the HIBP range client against a local fake range server', () => {
  let server: Server;
  let url: string;
  const asked: string[] = [];
  let delayMs = 0;
  const leaked = 'correct horse battery staple';
  const sha1 = createHash('sha1').update(leaked).digest('hex').toUpperCase();

  beforeAll(async () => {
    server = createServer((req, res) => {
      asked.push(req.url ?? '');
      const prefix = (req.url ?? '').split('/').pop()!;
      const body = prefix === sha1.slice(0, 5) ? `0000000000000000000000000000000000A:0\r\n${sha1.slice(5)}:3861493\r\n` : '0000000000000000000000000000000000B:2\r\n';
      setTimeout(() => res.end(body), delayMs);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/range`;
  });
  afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

  it('finds a leaked password sending only the first five hex characters of its SHA-1', async () => {
    const failures: string[] = [];
    const check = hibpRangeClient({ url, timeoutMs: 1000, onFailure: (r) => failures.push(r) });
    expect(await check(leaked)).toBe('breached');
    expect(await check('tabby-violin-harbour-42')).toBe('clear');
    expect(asked[0]).toBe(`/range/${sha1.slice(0, 5)}`);
    expect(asked.join(' ')).not.toContain(sha1.slice(5));
    expect(failures).toEqual([]);
  });

  it('answers unknown (never breached) on a timeout or an outage, and says why without the password', async () => {
    const failures: string[] = [];
    delayMs = 500;
    const check = hibpRangeClient({ url, timeoutMs: 100, onFailure: (r) => failures.push(r) });
    expect(await check(leaked)).toBe('unknown');
    delayMs = 0;
    const down = hibpRangeClient({ url: 'http://127.0.0.1:1/range', timeoutMs: 500, onFailure: (r) => failures.push(r) });
    expect(await down(leaked)).toBe('unknown');
    expect(failures).toEqual(['timeout', 'unreachable']);
  });
});
