import { DummyDriver, Kysely, PostgresAdapter, PostgresIntrospector, PostgresQueryCompiler, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/storage/schema.js';
import { findAppsWithCodeRedemptions, findAppsWithRefreshFamilies } from '../../src/storage/repos/grants.js';
import { useMigratedTestStorage } from '../helpers/app.js';

// PostgreSQL only: the grants' batched client reads look each asked code or token up in its table's
// primary key, in custom and generic plans alike, even on a fresh database whose tables the planner
// believes tiny. A plan that reaches the asked rows another way (the whole codes table hashed, as the
// flattened join did) reads ever more rows on each call as the table grows, and PostgreSQL may keep
// such a plan as its generic one. (How the rows joined to an asked one
// are read is left to the planner: on tiny tables it may scan them.)

interface BatchedRead {
  name: string;
  /** Runs the read once on `conn`. */
  run(conn: Kysely<Database>): Promise<unknown>;
  /** The table each key is looked up in, by its primary key. */
  table: string;
  /** That lookup's index condition, keyed by the asked key. */
  lookup: string;
}

const READS: BatchedRead[] = [
  { name: 'code grant', run: (conn) => findAppsWithCodeRedemptions(conn, [{ appId: 'app_1', codeHash: 'k1' }]), table: 'authorization_codes', lookup: 'code_hash = pair.key' },
  { name: 'refresh grant', run: (conn) => findAppsWithRefreshFamilies(conn, [{ appId: 'app_1', tokenHash: 'k1' }]), table: 'refresh_tokens', lookup: 'token_hash = pair.key' },
];

/** The index conditions of the plan's scans of `table` by its primary key. */
function primaryKeyLookups(plan: string, table: string): string[] {
  const lines = plan.split('\n');
  return lines.flatMap((line, i) => (line.includes(`Index Scan using ${table}_pkey on ${table} `) ? [lines[i + 1]!.trim().replace(/^Index Cond: /, '')] : []));
}

/** The SQL text of the read, as compiled for PostgreSQL (by a Kysely that records it and runs nothing). */
async function statementText(read: BatchedRead): Promise<string> {
  const texts: string[] = [];
  const recorder = new Kysely<Database>({
    dialect: {
      createAdapter: () => new PostgresAdapter(),
      createDriver: () => new DummyDriver(),
      createIntrospector: (db) => new PostgresIntrospector(db),
      createQueryCompiler: () => new PostgresQueryCompiler(),
    },
    log: (event) => void texts.push(event.query.sql),
  });
  await read.run(recorder);
  expect(texts).toHaveLength(1);
  return texts[0]!;
}

/** The plan of `text` for three asked (app, key) pairs, planned on `conn` as PostgreSQL plans a prepared statement in `mode`. */
async function planOf(conn: Kysely<Database>, text: string, mode: 'force_custom_plan' | 'force_generic_plan'): Promise<string> {
  await sql.raw(`set plan_cache_mode = ${mode}`).execute(conn);
  await sql.raw(`prepare plan_probe as ${text}`).execute(conn);
  try {
    const { rows } = await sql<{ 'QUERY PLAN': string }>`explain execute plan_probe(array['app_1', 'app_1', 'app_2'], array['k1', 'k2', 'k3'])`.execute(conn);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await sql.raw('deallocate plan_probe').execute(conn);
    await sql.raw('reset plan_cache_mode').execute(conn);
  }
}

describe('batched grant reads plan a primary-key lookup per asked key', () => {
  const database = useMigratedTestStorage();

  for (const read of READS) {
    for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
      it(`${read.name}: ${mode}`, async () => {
        // `prepare` and `set` hold for one connection: the probe runs on one.
        const text = await statementText(read);
        const plan = await database.storage.db.connection().execute((conn) => planOf(conn, text, mode));
        expect(primaryKeyLookups(plan, read.table)).toEqual([`(${read.lookup})`]);
        expect(plan).not.toContain(`Seq Scan on ${read.table} `);
      });
    }
  }
});
