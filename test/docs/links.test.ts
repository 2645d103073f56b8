import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf, unfenced } from '../helpers/docs.js';

/** Every relative link and anchor in README.md and docs/ leads somewhere (docs/README.md, "Docs that cannot rot"). */
const ROOT = resolve(import.meta.dirname, '../..');

function markdownFiles(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return markdownFiles(path);
    return name.endsWith('.md') ? [path] : [];
  });
}

const prose = (text: string) => unfenced(text).replace(/`[^`\n]*`/g, '');

const files = [join(ROOT, 'README.md'), join(ROOT, 'SECURITY.md'), join(ROOT, 'RELIABILITY.md'), join(ROOT, 'CHANGELOG.md'), ...markdownFiles(join(ROOT, 'docs'))].filter(existsSync);

describe('documentation links', () => {
  it.each(files.map((f) => [relative(ROOT, f), f]))('%s: every relative link and anchor resolves', (_name, file) => {
    const text = readFileSync(file, 'utf8');
    const broken: string[] = [];
    for (const [, target] of prose(text).matchAll(/\]\(([^)\s]+)\)/g)) {
      if (/^[a-z][a-z+.-]*:/i.test(target!)) continue; // http:, https:, mailto:
      const [path, anchor] = target!.split('#') as [string, string | undefined];
      const linked = path === '' ? file : resolve(dirname(file), decodeURIComponent(path));
      if (!existsSync(linked)) {
        broken.push(`${target} (no such file)`);
        continue;
      }
      if (anchor && linked.endsWith('.md') && !anchorsOf(readFileSync(linked, 'utf8')).has(anchor)) broken.push(`${target} (no such heading)`);
    }
    expect(broken).toEqual([]);
  });

  it('the anchor rule matches GitHub on the headings we write', () => {
    expect([...anchorsOf('# Two-step verification (TOTP, passkeys, recovery codes)\n## `WORKERS` and Redis\n## A\n## A')]).toEqual([
      'two-step-verification-totp-passkeys-recovery-codes',
      'workers-and-redis',
      'a',
      'a-1',
    ]);
  });
});
