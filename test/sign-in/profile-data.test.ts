import { describe, expect, it } from 'vitest';
import {
  isValidBirthdate,
  normalizeProfileValue,
  PROFILE_FIELDS,
  type ProfileField,
  parseProfileData,
} from '../../src/sign-in/profile-data.js';

/** The one profile-data rule (src/sign-in/profile-data.ts): pure, with the clock's time passed in. */

/** 2000-01-01T00:00:00Z: a fixed "now", so "future" is relative to what the caller passes, not the wall clock. */
const NOW_2000 = Date.UTC(2000, 0, 1) / 1000;
const NOW = Date.UTC(2026, 5, 15, 12) / 1000;
const ALL = PROFILE_FIELDS;

describe('isValidBirthdate', () => {
  const CASES: Array<[string, number, boolean, string]> = [
    ['1990-02-03', NOW, true, 'an ordinary past date'],
    ['1900-01-01', NOW, true, 'the first accepted year'],
    ['1899-12-31', NOW, false, '1899'],
    ['1990-02-30', NOW, false, 'Feb 30'],
    ['2023-02-29', NOW, false, 'Feb 29 of a common year'],
    ['2024-02-29', NOW, true, 'Feb 29 of a leap year'],
    ['1990-13-01', NOW, false, 'month 13'],
    ['1990-00-10', NOW, false, 'month 0'],
    ['1990-04-31', NOW, false, 'April 31'],
    ['03/02/1990', NOW, false, 'not ISO'],
    ['1990-2-3', NOW, false, 'no zero padding'],
    ['19900203', NOW, false, 'basic format'],
    ['1990-02-03T00:00:00Z', NOW, false, 'a timestamp, not a date'],
    ['+01990-02-03', NOW, false, 'expanded year'],
    ['', NOW, false, 'empty'],
    ['1999-12-31', NOW_2000, true, 'the day before now'],
    ['2000-01-01', NOW_2000, true, 'today (midnight UTC) is not in the future'],
    ['2000-01-02', NOW_2000, false, 'tomorrow relative to the passed now'],
    ['2010-05-05', NOW_2000, false, 'past by the wall clock, future relative to the passed now'],
    ['2999-01-01', NOW, false, 'far future'],
  ];

  it.each(CASES)('%s (now=%d) → %s: %s', (value, now, expected) => {
    expect(isValidBirthdate(value, now)).toBe(expected);
  });
});

describe('normalizeProfileValue', () => {
  const CASES: Array<[ProfileField, string, string]> = [
    ['phone_number', '+1 (415) 555-0100', '+14155550100'],
    ['phone_number', '+1.415.555.0100', '+14155550100'],
    ['phone_number', ' +44 20 7946 0958 ', '+442079460958'],
    ['phone_number', '+49\t30-1234567', '+49301234567'],
    ['phone_number', '+14155550100', '+14155550100'],
    ['name', '  Ada Lovelace  ', 'Ada Lovelace'],
    ['name', 'Ada  Lovelace', 'Ada  Lovelace'],
    ['birthdate', ' 1990-02-03 ', '1990-02-03'],
  ];
  it.each(CASES)('%s %j → %j', (field, input, expected) => {
    expect(normalizeProfileValue(field, input)).toBe(expected);
  });
});

describe('parseProfileData', () => {
  type Rules = Parameters<typeof parseProfileData>[1];
  type Case = {
    name: string;
    input: Partial<Record<ProfileField, string>>;
    rules: Omit<Rules, 'now'> & { now?: number };
    expected: { ok: true; patch: Record<string, string | null> } | { ok: false; problems: Array<{ field: ProfileField; reason: string }> };
  };

  const CASES: Case[] = [
    // accepted / not_requested
    { name: 'nothing supplied, nothing required', input: {}, rules: { accepted: ALL }, expected: { ok: true, patch: {} } },
    {
      name: 'every field valid',
      input: { name: 'Ada', phone_number: '+14155550100', birthdate: '1990-02-03' },
      rules: { accepted: ALL },
      expected: { ok: true, patch: { name: 'Ada', phone_number: '+14155550100', birthdate: '1990-02-03' } },
    },
    {
      name: 'a field outside accepted is refused, never dropped',
      input: { name: 'Ada', phone_number: '+14155550100' },
      rules: { accepted: ['phone_number'] },
      expected: { ok: false, problems: [{ field: 'name', reason: 'not_requested' }] },
    },
    {
      name: 'a field outside accepted is refused even when empty',
      input: { birthdate: '' },
      rules: { accepted: ['name'], allowClear: true },
      expected: { ok: false, problems: [{ field: 'birthdate', reason: 'not_requested' }] },
    },
    {
      name: 'accepting nothing refuses everything supplied',
      input: { name: 'Ada', birthdate: '1990-02-03' },
      rules: { accepted: [] },
      expected: { ok: false, problems: [{ field: 'name', reason: 'not_requested' }, { field: 'birthdate', reason: 'not_requested' }] },
    },
    // required
    {
      name: 'a required field absent',
      input: { name: 'Ada' },
      rules: { accepted: ['name', 'phone_number'], required: ['name', 'phone_number'] },
      expected: { ok: false, problems: [{ field: 'phone_number', reason: 'required' }] },
    },
    {
      name: 'a required field empty',
      input: { name: '   ' },
      rules: { accepted: ['name'], required: ['name'] },
      expected: { ok: false, problems: [{ field: 'name', reason: 'required' }] },
    },
    {
      name: 'a required field invalid (not empty) is invalid, not required',
      input: { phone_number: '12345' },
      rules: { accepted: ['phone_number'], required: ['phone_number'] },
      expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] },
    },
    {
      name: 'an optional accepted field left out is fine',
      input: { name: 'Ada' },
      rules: { accepted: ALL, required: ['name'] },
      expected: { ok: true, patch: { name: 'Ada' } },
    },
    // allowClear
    {
      name: 'allowClear: empty values clear',
      input: { name: '', phone_number: ' ', birthdate: '' },
      rules: { accepted: ALL, allowClear: true },
      expected: { ok: true, patch: { name: null, phone_number: null, birthdate: null } },
    },
    {
      name: 'without allowClear an empty value is invalid',
      input: { birthdate: '' },
      rules: { accepted: ALL },
      expected: { ok: false, problems: [{ field: 'birthdate', reason: 'invalid' }] },
    },
    {
      name: 'allowClear still refuses invalid non-empty values',
      input: { name: 'Ada', phone_number: '4155550100' },
      rules: { accepted: ALL, allowClear: true },
      expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] },
    },
    // phone numbers
    { name: 'phone with spaces, brackets, dashes', input: { phone_number: '+1 (415) 555-0100' }, rules: { accepted: ALL }, expected: { ok: true, patch: { phone_number: '+14155550100' } } },
    { name: 'phone with dots', input: { phone_number: '+33.1.23.45.67.89' }, rules: { accepted: ALL }, expected: { ok: true, patch: { phone_number: '+33123456789' } } },
    { name: 'phone of 7 digits (shortest E.164)', input: { phone_number: '+1234567' }, rules: { accepted: ALL }, expected: { ok: true, patch: { phone_number: '+1234567' } } },
    { name: 'phone of 15 digits (longest E.164)', input: { phone_number: '+123456789012345' }, rules: { accepted: ALL }, expected: { ok: true, patch: { phone_number: '+123456789012345' } } },
    { name: 'phone of 6 digits', input: { phone_number: '+123456' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] } },
    { name: 'phone of 16 digits', input: { phone_number: '+1234567890123456' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] } },
    { name: 'phone without a plus', input: { phone_number: '14155550100' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] } },
    { name: 'phone with a leading zero', input: { phone_number: '+0 415 555 0100' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] } },
    { name: 'phone with letters', input: { phone_number: '+1415CALLNOW' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] } },
    { name: 'phone with two plus signs', input: { phone_number: '++14155550100' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'phone_number', reason: 'invalid' }] } },
    // names
    { name: 'name trimmed', input: { name: '  Zoë Example  ' }, rules: { accepted: ALL }, expected: { ok: true, patch: { name: 'Zoë Example' } } },
    { name: 'name of 100 characters', input: { name: 'x'.repeat(100) }, rules: { accepted: ALL }, expected: { ok: true, patch: { name: 'x'.repeat(100) } } },
    { name: 'name of 100 emoji (code points, not UTF-16 units)', input: { name: '😀'.repeat(100) }, rules: { accepted: ALL }, expected: { ok: true, patch: { name: '😀'.repeat(100) } } },
    { name: 'name of 101 characters', input: { name: 'x'.repeat(101) }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with CR/LF', input: { name: 'Ada\r\nSet-Cookie: x=1' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with LF only', input: { name: 'Ada\nLovelace' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with an ESC sequence', input: { name: 'Ada\u001b[31m' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with NUL', input: { name: 'Ada\u0000Lovelace' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with a tab inside', input: { name: 'Ada\tLovelace' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with DEL', input: { name: 'Ada\u007f' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    { name: 'name with control characters even where clearing is allowed', input: { name: '\u001b' }, rules: { accepted: ALL, allowClear: true }, expected: { ok: false, problems: [{ field: 'name', reason: 'invalid' }] } },
    // birthdates
    { name: 'birthdate Feb 30', input: { birthdate: '1990-02-30' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'birthdate', reason: 'invalid' }] } },
    { name: 'birthdate 1899', input: { birthdate: '1899-06-01' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'birthdate', reason: 'invalid' }] } },
    { name: 'birthdate not ISO', input: { birthdate: '02/03/1990' }, rules: { accepted: ALL }, expected: { ok: false, problems: [{ field: 'birthdate', reason: 'invalid' }] } },
    { name: 'birthdate after the passed now', input: { birthdate: '2005-05-05' }, rules: { accepted: ALL, now: NOW_2000 }, expected: { ok: false, problems: [{ field: 'birthdate', reason: 'invalid' }] } },
    { name: 'birthdate before the passed now', input: { birthdate: '1999-12-31' }, rules: { accepted: ALL, now: NOW_2000 }, expected: { ok: true, patch: { birthdate: '1999-12-31' } } },
    { name: 'birthdate padded with spaces', input: { birthdate: ' 1990-02-03 ' }, rules: { accepted: ALL }, expected: { ok: true, patch: { birthdate: '1990-02-03' } } },
    // several problems at once
    {
      name: 'every problem is reported, in field order, and nothing is patched',
      input: { birthdate: '1990-02-30', name: 'Ada\u001b', phone_number: '+1 (415) 555-0100' },
      rules: { accepted: ['name', 'birthdate'], required: ['name', 'birthdate'] },
      expected: {
        ok: false,
        problems: [
          { field: 'name', reason: 'invalid' },
          { field: 'phone_number', reason: 'not_requested' },
          { field: 'birthdate', reason: 'invalid' },
        ],
      },
    },
  ];

  it.each(CASES)('$name', ({ input, rules, expected }) => {
    const result = parseProfileData(input, { ...rules, now: rules.now ?? NOW });
    expect(result).toEqual(expected);
  });

  it('undefined values count as not supplied', () => {
    expect(parseProfileData({ name: undefined, phone_number: undefined }, { accepted: [], now: NOW })).toEqual({ ok: true, patch: {} });
    expect(parseProfileData({ name: undefined }, { accepted: ['name'], required: ['name'], now: NOW })).toEqual({ ok: false, problems: [{ field: 'name', reason: 'required' }] });
  });

  it('ignores keys that are not profile fields (the callers never pass them through)', () => {
    const input = { name: 'Ada', email: 'evil@example.com', status: 'active' } as unknown as Record<ProfileField, string>;
    expect(parseProfileData(input, { accepted: ALL, now: NOW })).toEqual({ ok: true, patch: { name: 'Ada' } });
  });

  it('a field outside the accepted ones that restates its stored value is a no-op; a different value is refused', () => {
    const current = { name: 'Ada', phone_number: '+14155550100', birthdate: null };
    expect(parseProfileData({ phone_number: '+1 415 555 0100' }, { accepted: [], now: NOW, current })).toEqual({ ok: true, patch: {} });
    expect(parseProfileData({ name: 'Mallory' }, { accepted: [], now: NOW, current })).toEqual({ ok: false, problems: [{ field: 'name', reason: 'not_requested' }] });
  });
});
