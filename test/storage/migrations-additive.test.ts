import { readdirSync, readFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The expand/contract rule (docs/operations/migrations.md): the `up` step of every migration is
 * additive, so the version still running when it is applied keeps working, unless the file carries a
 * `// contract: <reason>` or `// data: <reason>` marker for what it does beyond that.
 */

const MIGRATIONS = resolve(import.meta.dirname, '../../migrations');

type Kind = 'contract' | 'data';

/** What a non-additive step looks like, in the query builder or in raw SQL, and which marker excuses it. */
const NOT_ADDITIVE: Array<{ kind: Kind; what: string; pattern: RegExp }> = [
  { kind: 'contract', what: 'drops a table, column, index or function', pattern: /\.drop(Table|Column|Index|Schema|View|Type)\(|\bDROP\s+(TABLE|COLUMN|INDEX|TRIGGER|FUNCTION|VIEW|TYPE)\b/i },
  { kind: 'contract', what: 'renames', pattern: /\.rename(Column|To)\(|\bRENAME\b/i },
  { kind: 'contract', what: 'changes a column in place', pattern: /\.(modifyColumn|alterColumn)\(|\bALTER\s+COLUMN\b|\bSET\s+NOT\s+NULL\b/i },
  {
    kind: 'contract',
    what: 'adds a NOT NULL column without a default',
    // To an existing table (alterTable … execute, or raw ADD COLUMN); createTable may declare NOT NULL columns.
    pattern: /\.alterTable\((?:(?!\.execute\()[\s\S])*\.notNull\(\)(?:(?!\.defaultTo\()(?!\.execute\()[\s\S])*\.execute\(|\bADD\s+COLUMN\s+[^,`]*\bNOT\s+NULL\b(?![^,`]*\bDEFAULT\b)/i,
  },
  { kind: 'data', what: 'updates or deletes existing rows', pattern: /\.(updateTable|deleteFrom)\(|\bUPDATE\s+\w+(\s+\w+)?\s+SET\b|\bDELETE\s+FROM\b/i },
  { kind: 'data', what: 'creates a trigger that changes rows', pattern: /\bCREATE\s+(OR\s+REPLACE\s+)?TRIGGER\b/i },
];

/** The text a migration runs going up: the file without its `down` step and without comments. */
function upText(source: string): string {
  const down = source.search(/export\s+(async\s+)?function\s+down\b/);
  const up = down < 0 ? source : source.slice(0, down);
  return up.replace(/^\s*\/\/.*$/gm, '');
}

/** The markers a file carries, each with its reason. */
function markers(source: string): Map<Kind, string> {
  const found = new Map<Kind, string>();
  for (const match of source.matchAll(/^\s*\/\/\s*(contract|data):\s*(\S.*)$/gm)) found.set(match[1] as Kind, match[2]!);
  return found;
}

/** What is wrong with a migration under the rule: each non-additive step without the marker of its kind. */
function problemsOf(source: string): string[] {
  const text = upText(source);
  // SQLite's FTS5 virtual tables can only be created, filled and dropped whole: their statements are not checked.
  const checked = text.replace(/[^\n]*\b\w+_fts\b[^\n]*/g, '');
  const marked = markers(source);
  return NOT_ADDITIVE.filter(({ kind, pattern }) => pattern.test(checked) && !marked.has(kind)).map(({ kind, what }) => `${what} without a "// ${kind}: <reason>" marker`);
}

describe('migrations are additive (expand/contract, docs/operations/migrations.md)', () => {
  const files = readdirSync(MIGRATIONS).filter((name) => /^\d{4}-\d{2}-\d{2}T\d{4}_.*\.ts$/.test(name));

  it('finds the migrations', () => {
    expect(files.length).toBeGreaterThan(5);
  });

  it.each(files)('%s is additive or says why not', (name) => {
    expect(problemsOf(readFileSync(join(MIGRATIONS, name), 'utf8'))).toEqual([]);
  });

  it('the check refuses a rename, a drop, a NOT NULL column without default and a data change, unless marked', () => {
    const up = (body: string) => `export async function up(db) {\n${body}\n}\nexport async function down(db) {\n  await db.schema.dropTable('t').execute();\n}\n`;
    expect(problemsOf(up("  await db.schema.createTable('t').addColumn('id', 'text', (c) => c.primaryKey().notNull()).execute();"))).toEqual([]);
    expect(problemsOf(up("  await db.schema.alterTable('t').addColumn('x', 'text').execute();"))).toEqual([]);
    expect(problemsOf(up("  await db.schema.alterTable('t').addColumn('x', 'integer', (c) => c.notNull().defaultTo(0)).execute();"))).toEqual([]);
    expect(problemsOf(up("  await db.schema.alterTable('t').addColumn('x', 'integer', (c) => c.notNull()).execute();"))).toHaveLength(1);
    expect(problemsOf(up("  await db.schema.alterTable('t').renameColumn('a', 'b').execute();"))).toHaveLength(1);
    expect(problemsOf(up("  await sql`ALTER TABLE t DROP COLUMN a`.execute(db);"))).toHaveLength(1);
    expect(problemsOf(up("  await sql`ALTER TABLE t ADD COLUMN a text NOT NULL`.execute(db);"))).toHaveLength(1);
    expect(problemsOf(up("  await sql`ALTER TABLE t ADD COLUMN a text NOT NULL DEFAULT ''`.execute(db);"))).toEqual([]);
    expect(problemsOf(up("  await db.updateTable('t').set({ a: 1 }).execute();"))).toHaveLength(1);
    expect(problemsOf(`// data: every row of t gets a=1 before the version that reads it starts\n${up("  await db.updateTable('t').set({ a: 1 }).execute();")}`)).toEqual([]);
    expect(problemsOf(`// contract: t.a is unused since 1.4\n${up("  await db.schema.alterTable('t').dropColumn('a').execute();")}`)).toEqual([]);
  });
});
