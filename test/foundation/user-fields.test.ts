import { describe, expect, it } from 'vitest';
import { isValidDisplayName, isValidEmailAddress } from '../../src/shared/user-fields.js';

describe('email address and display name rule', () => {
  it.each([
    ['alice@example.com', true],
    ['ops@localhost', true],
    ['Ünïcode@exämple.com', true],
    ['a@b', true],
    ['no-at-sign', false],
    ['two@@example.com', false],
    ['space in@example.com', false],
    ['nul\u0000@example.com', false],
    ['tab\t@example.com', false],
    ['del\u007f@example.com', false],
    [`${'a'.repeat(250)}@b.c`, true], // 254 characters: the limit
    [`${'a'.repeat(251)}@b.c`, false],
    ['@', false],
  ])('email %j → %s', (value, expected) => {
    expect(isValidEmailAddress(value)).toBe(expected);
  });

  it.each([
    ['Alice', true],
    ['爱丽丝', true],
    ['<img src=x onerror=alert(1)>', true], // stored inert, escaped where shown
    ['🙂'.repeat(100), true],
    ['🙂'.repeat(101), false],
    ['', false],
    ['a\u0000b', false],
    ['line\nbreak', false],
  ])('name %j → %s', (value, expected) => {
    expect(isValidDisplayName(value)).toBe(expected);
  });
});
