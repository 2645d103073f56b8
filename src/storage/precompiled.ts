import type { Compilable, CompiledQuery, Kysely, QueryResult } from 'kysely';
import type { Database } from './schema.js';

/** A statement parameter: a value, or an array that PostgreSQL takes as one array parameter (`= any($1)`, `unnest`). */
type Param = string | number | null | readonly (string | number | null)[];

/**
 * The SQL texts of hot statements, each with a statement name: on PostgreSQL the pool prepares a named
 * statement once per connection (pg sends Parse only the first time), so the server neither parses nor
 * re-plans it on every call (`withNamedStatements`, docs/adr/0001-postgres-named-statements.md).
 * Bounded: only statements built once are here.
 */
const statementNames = new Map<string, string>();

/** The name of a hot statement, undefined for any other SQL text. */
export function statementName(sql: string): string | undefined {
  return statementNames.get(sql);
}

/** `count` unique marker strings, standing in for the parameters of type P while the statement is built. */
function placeholders<P extends readonly Param[]>(count: number): P;
function placeholders(count: number): readonly Param[] {
  return Array.from({ length: count }, (_, i) => `\u0000gatehouse-parameter-${i}\u0000`);
}

/**
 * A hot statement built and compiled once per dialect instead of on every call: Kysely's immutable
 * builders and its compiler cost a bearer read about a tenth of its time (bench/RESULTS.md, "http").
 * `build` is called once, with a unique marker string in place of each parameter; every call then puts
 * its own values where the markers landed in the compiled parameters (constants of the statement stay).
 * So `build` must pass each parameter to Kysely as a plain value (compared, inserted or set), never
 * inspect or transform it.
 * Results are Kysely's raw ones: rows as selected, `numAffectedRows` for writes.
 */
export function precompiled<P extends readonly Param[], R>(build: (db: Kysely<Database>, ...params: P) => Compilable<R>) {
  // Per dialect adapter: a transaction's Kysely is a new object, its adapter (hence its SQL) is not.
  const compiled = new WeakMap<object, { query: CompiledQuery<R>; slots: number[] }>();
  const compile = (db: Kysely<Database>, ...params: P): CompiledQuery<R> => {
    const executor = db.getExecutor();
    // Plugins rewrite a query while it is compiled (tests record statements so): build it every time.
    if (executor.plugins.length > 0) return build(db, ...params).compile();
    let entry = compiled.get(executor.adapter);
    if (!entry) {
      const markers = placeholders<P>(params.length);
      const query = build(db, ...markers).compile();
      // Which call parameter each compiled parameter is (-1: a constant of the statement itself).
      const slots = query.parameters.map((value) => markers.indexOf(value as Param));
      if (markers.some((_, i) => !slots.includes(i))) throw new Error(`precompiled query that drops a parameter: ${query.sql}`);
      entry = { query, slots };
      if (!statementNames.has(query.sql)) statementNames.set(query.sql, `gatehouse_${statementNames.size + 1}`);
      compiled.set(executor.adapter, entry);
    }
    const { query, slots } = entry;
    // One literal, not `{ ...query, parameters }`: a spread followed by more properties makes a new hidden class per call.
    return { sql: query.sql, query: query.query, queryId: query.queryId, parameters: query.parameters.map((constant, i) => (slots[i]! < 0 ? constant : params[slots[i]!])) };
  };
  return async (db: Kysely<Database>, ...params: P): Promise<QueryResult<R>> => db.executeQuery<R>(compile(db, ...params));
}
