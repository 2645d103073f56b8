import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { COLUMNS } from '../../src/storage/columns.js';
import { useMigratedTestStorage } from '../helpers/app.js';

/**
 * Statements name the columns they read (docs/operations/migrations.md): a column a newer version adds
 * under a running process changes none of their results. The repos never select a whole table row, and
 * COLUMNS, the lists they select, are the columns the migrations create.
 */

const REPOS = resolve(import.meta.dirname, '../../src/storage/repos');

describe('statements name their columns', () => {
  it('no repo selects or returns a whole table row', () => {
    const found: string[] = [];
    for (const name of readdirSync(REPOS).filter((file) => file.endsWith('.ts'))) {
      const source = readFileSync(join(REPOS, name), 'utf8');
      const tableAliases = new Set([...source.matchAll(/'\w+ as (\w+)'/g)].map((m) => m[1]!));
      for (const [line, text] of source.split('\n').entries()) {
        const whole =
          /\.(selectAll|returningAll)\(\s*\)/.test(text) ||
          /\b(select|returning)\s+\*/i.test(text) ||
          // An alias's every column is a whole row only for a table; a subquery's columns are its own list.
          [...text.matchAll(/\.selectAll\('(\w+)'\)|\b(\w+)\.\*/g)].some((m) => tableAliases.has(m[1] ?? m[2]!) || (m[1] ?? m[2]!) in COLUMNS);
        if (whole) found.push(`${name}:${line + 1}: ${text.trim()}`);
      }
    }
    expect(found).toEqual([]);
  });

  describe('COLUMNS lists every column the migrations create', () => {
    const database = useMigratedTestStorage();
    it('for each table', async () => {
      const tables = await database.storage.db.introspection.getTables();
      // SQLite's app_users.seq keys the search table (its triggers' business): no statement reads it.
      const internal = new Set(['app_users.seq']);
      const created = Object.fromEntries(
        tables.filter((t) => t.name in COLUMNS).map((t) => [t.name, t.columns.map((c) => c.name).filter((c) => !internal.has(`${t.name}.${c}`)).sort()]),
      );
      const listed = Object.fromEntries(Object.entries(COLUMNS).map(([table, columns]) => [table, [...columns].sort()]));
      expect(created).toEqual(listed);
    });
  });
});
