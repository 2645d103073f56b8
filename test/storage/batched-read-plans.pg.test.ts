import { type Kysely, sql } from 'kysely';
import { describe, expect, it } from 'vitest';
import type { Database } from '../../src/storage/schema.js';
import { findAppsWithCodeRedemptions, findAppsWithRefreshFamilies } from '../../src/storage/repos/grants.js';
import { useMigratedTestStorage } from '../helpers/app.js';

// PostgreSQL only: the grants' batched client reads look each asked key up by its table's primary key,
// whatever the planner believes of the table's size. PostgreSQL plans these statements anew on most calls,
// from statistics that may be missing or old (a fresh database, autovacuum off): a plan that joins the
// whole table instead reads every code or token of the database on each call once the table has grown
// (bench/RESULTS.md, finding 91).

/** The batched read of `table`: run once on `conn`, which prepares it there, and its text as the server holds it. */
async function batchedReadText(conn: Kysely<Database>, table: 'authorization_codes' | 'refresh_tokens'): Promise<string> {
  if (table === 'authorization_codes') expect(await findAppsWithCodeRedemptions(conn, [{ appId: 'app_1', codeHash: 'k1' }])).toEqual([undefined]);
  else expect(await findAppsWithRefreshFamilies(conn, [{ appId: 'app_1', tokenHash: 'k1' }])).toEqual([undefined]);
  const { rows } = await sql<{ statement: string }>`select statement from pg_prepared_statements where statement like '%with ordinality%'`.execute(conn);
  const texts = rows.map((r) => r.statement).filter((s) => s.includes(`from "${table}"`));
  expect(texts).toHaveLength(1);
  return texts[0]!;
}

/** The plan of `text` for three asked keys, planned on `conn` as PostgreSQL plans a prepared statement in `mode`. */
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

  for (const [table, key] of [
    ['authorization_codes', 'authorization_codes_pkey'],
    ['refresh_tokens', 'refresh_tokens_pkey'],
  ] as const) {
    for (const mode of ['force_custom_plan', 'force_generic_plan'] as const) {
      it(`${table}: ${mode}`, async () => {
        // The server holds a prepared statement on the connection that ran it: one connection for all.
        const plan = await database.storage.db.connection().execute(async (conn) => planOf(conn, await batchedReadText(conn, table), mode));
        expect(plan).toContain(`Index Scan using ${key} on ${table}`);
        expect(plan).not.toMatch(new RegExp(`Seq Scan on ${table}\\b`));
      });
    }
  }
});
