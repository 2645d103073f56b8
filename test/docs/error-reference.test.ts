import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERROR_CATALOGUE } from '../../src/errors.js';

/** docs/reference/errors.md lists the whole catalogue as the code has it. */
describe('the error reference page', () => {
  const page = readFileSync(new URL('../../docs/reference/errors.md', import.meta.url), 'utf8');
  const rows = new Map([...page.matchAll(/^\| `([a-z_]+)` \| (\d{3}) \| (.+) \|$/gm)].map((m) => [m[1]!, [Number(m[2]), m[3]!] as const]));

  it.each(Object.entries(ERROR_CATALOGUE))('%s is listed with its status and message', (code, [status, message]) => {
    expect(rows.get(code)).toEqual([status, message]);
  });

  it('lists no code the catalogue does not have', () => {
    expect([...rows.keys()].filter((code) => !(code in ERROR_CATALOGUE))).toEqual([]);
  });
});
