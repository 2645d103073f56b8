import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { envSchema } from '../../src/config.js';

/**
 * docs/reference/configuration.md lists exactly the variables the config schema reads, each with the
 * schema's default: a variable added, removed or given another default without the page fails here.
 */
const page = readFileSync(new URL('../../docs/reference/configuration.md', import.meta.url), 'utf8');
/** Variables Node itself reads, documented because they matter here. */
const NODE_VARIABLES = new Set(['UV_THREADPOOL_SIZE']);

/** The page's table: each documented variable with the default shown for it (rows may name several, `A` / `B` or `A`, `B`). */
function documented(): Map<string, string> {
  const rows = new Map<string, string>();
  for (const [, names, defaults] of page.matchAll(/^\| (`[A-Z0-9_]+`(?:(?: \/ |, )`[A-Z0-9_]+`)*) \| ([^|]+) \|/gm)) {
    const variables = names!.split(/ \/ |, /).map((n) => n.replaceAll('`', ''));
    const values = defaults!.trim().split(' / ');
    variables.forEach((name, i) => rows.set(name, (values.length === variables.length ? values[i]! : values[0]!).trim()));
  }
  return rows;
}

describe('the configuration reference page', () => {
  const rows = documented();
  const variables = Object.keys(envSchema.shape);

  it('documents every variable the schema reads, and no other', () => {
    expect(variables.filter((name) => !rows.has(name))).toEqual([]);
    expect([...rows.keys()].filter((name) => !variables.includes(name) && !NODE_VARIABLES.has(name))).toEqual([]);
  });

  // A variable without a schema default is shown unset, or with what it is computed from (`$BASE_URL`).
  const withDefault = variables.flatMap((name) => {
    const fallback = (envSchema.shape as Record<string, { safeParse(v: unknown): { success: boolean; data?: unknown } }>)[name]!.safeParse(undefined);
    return fallback.success && fallback.data !== undefined ? [[name, `\`${String(fallback.data)}\``] as const] : [];
  });

  it.each(withDefault)('%s shows the schema default %s', (name, fallback) => {
    expect(rows.get(name)).toBe(fallback);
  });
});
