import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { VIEWS_DIR } from '../../src/plugins/views.js';

/**
 * One register per language: the pages and mails address a person one way and name one thing one
 * word. Simplified Chinese says 你 (not 您) and 账号 (not 账户) everywhere.
 */
const REGISTER: Record<string, Array<{ use: string; never: string }>> = {
  'zh-CN': [
    { use: '你', never: '您' },
    { use: '账号', never: '账户' },
  ],
};

describe('each locale keeps one register', () => {
  for (const [locale, rules] of Object.entries(REGISTER)) {
    const dir = join(VIEWS_DIR, 'locales', locale);
    const messages: Record<string, string> = Object.assign({}, ...readdirSync(dir).filter((f) => f.endsWith('.json')).map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8'))));
    for (const { use, never } of rules) {
      it(`${locale}: says ${use}, never ${never}`, () => {
        expect(Object.entries(messages).filter(([, text]) => text.includes(never))).toEqual([]);
        expect(Object.values(messages).some((text) => text.includes(use))).toBe(true);
      });
    }
  }
});
