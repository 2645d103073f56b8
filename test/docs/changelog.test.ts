import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { INTERFACE_VERSION } from '../../src/openapi/document.js';

/** CHANGELOG.md's newest entry is the interface version openapi.yaml carries. */
describe('CHANGELOG.md', () => {
  it('begins with the interface version', () => {
    const changelog = readFileSync(new URL('../../CHANGELOG.md', import.meta.url), 'utf8');
    expect(changelog.match(/^## (\d+\.\d+\.\d+) — /m)?.[1]).toBe(INTERFACE_VERSION);
  });
});
