import { existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { anchorsOf } from '../helpers/docs.js';

/**
 * Code, tests and openapi.yaml cite the repository's own pages (`docs/reference/rest-api.md#throttling`),
 * never documents the repository does not hold: every such pointer names a page that exists and a
 * heading on it, and no "CONTRACT §…", "SECURITY.md item …" or "SPEC …" citation is left.
 */
const ROOT = resolve(import.meta.dirname, '../..');
const FOLDERS = ['src', 'test', 'migrations', 'scripts', 'bench', 'examples', 'views'];

function filesUnder(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir).flatMap((name) => {
    const path = join(dir, name);
    if (statSync(path).isDirectory()) return filesUnder(path);
    return /\.(ts|mjs|js|eta|json|yaml|sql)$/.test(name) ? [path] : [];
  });
}

const files = [...FOLDERS.flatMap((folder) => filesUnder(join(ROOT, folder))), join(ROOT, 'openapi.yaml')];
const POINTER = /\bdocs\/[A-Za-z0-9_./-]+?\.md(?:#[\p{L}\p{N}_-]+)?/gu;
const CITATION = /CONTRACT(?:\.md)? §\d|SECURITY\.md\s+(?:items?\s+\d|[A-P]\b|§|\d)|\bSPEC(?:\.md)? §?\d/;

describe('pointers from code into docs/', () => {
  it('every docs/….md#anchor named in code, tests and openapi.yaml resolves', () => {
    const broken: string[] = [];
    const anchors = new Map<string, Set<string>>();
    for (const file of files) {
      if (file === resolve(import.meta.filename)) continue;
      for (const [pointer] of readFileSync(file, 'utf8').matchAll(POINTER)) {
        const [page, anchor] = pointer.split('#') as [string, string | undefined];
        if (!existsSync(join(ROOT, page))) {
          broken.push(`${relative(ROOT, file)}: ${pointer} (no such page)`);
          continue;
        }
        if (!anchor) continue;
        if (!anchors.has(page)) anchors.set(page, anchorsOf(readFileSync(join(ROOT, page), 'utf8')));
        if (!anchors.get(page)!.has(anchor)) broken.push(`${relative(ROOT, file)}: ${pointer} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
  });

  it('no citation of a document the repository does not hold is left', () => {
    const left = files.filter((file) => file !== resolve(import.meta.filename) && CITATION.test(readFileSync(file, 'utf8'))).map((file) => relative(ROOT, file));
    expect(left).toEqual([]);
  });
});
