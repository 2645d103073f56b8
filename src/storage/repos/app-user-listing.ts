import { type Kysely, sql } from 'kysely';
import type { Dialect } from '../connect.js';
import type { Database } from '../schema.js';

/**
 * The developer user listing (docs/reference/rest-api.md#developers), built to stay fast with 1,000,000 users in one app
 * (migration 2026-11-21T0100_listing_indexes):
 * - email, name and the platform status are denormalised into app_users by triggers, so filtering,
 *   ordering and paging touch one table and only the page's rows are joined to users;
 * - `status` filters on `list_status` through (app_id, list_status, created_at desc, user_id desc);
 * - exact totals without `q` come from the trigger-kept app_user_counts (O(1));
 * - `q` uses one pg_trgm GIN index (PostgreSQL) or the FTS5 trigram table (SQLite) for queries of
 *   ≥ 3 characters, and returns the page with its exact total in one query; 1–2 character queries
 *   scan the app's rows (documented in bench/RESULTS.md).
 */

export type ListStatus = 'active' | 'blocked' | 'disabled';

export interface AppUserListQuery {
  appId: string;
  /** Case-insensitive substring of email or name. */
  q?: string;
  status?: ListStatus;
  page: number;
  pageSize: number;
}

export interface AppUserListRow {
  id: string;
  email: string;
  name: string | null;
  status: ListStatus;
  emailVerified: boolean;
  idpBound: boolean;
  createdAt: number;
  lastLoginAt: number | null;
  /** When the account is purged, if the person asked to delete it (docs/account/deletion.md). */
  deletionScheduledAt: number | null;
}

/** Trigram search needs three characters; FTS5 trigram phrases and pg_trgm both work from there. */
const TRIGRAM_MIN = 3;

const escapeLike = (value: string): string => value.replace(/[\\%_]/g, (c) => `\\${c}`);
const ftsPhrase = (value: string): string => `"${value.replace(/"/g, '""')}"`;

function searchCondition(dialect: Dialect, q: string) {
  const needle = q.toLowerCase();
  if (dialect === 'postgres') {
    const pattern = `%${escapeLike(needle)}%`;
    // The first test is the indexed expression (app_users_search_trgm_idx); the second keeps the meaning exact.
    return sql<boolean>`(lower(au.email || ' ' || coalesce(au.name, '')) LIKE ${pattern} AND (lower(au.email) LIKE ${pattern} OR lower(au.name) LIKE ${pattern}))`;
  }
  return sql<boolean>`(instr(lower(au.email), ${needle}) > 0 OR instr(lower(coalesce(au.name, '')), ${needle}) > 0)`;
}

/** The FROM clause: on SQLite a trigram search drives from the FTS table (CROSS JOIN fixes the join order). */
function fromClause(dialect: Dialect, q: string | undefined) {
  if (dialect === 'sqlite' && q && [...q].length >= TRIGRAM_MIN) {
    return sql`app_users_fts CROSS JOIN app_users au ON au.seq = app_users_fts.rowid`;
  }
  return sql`app_users au`;
}

function whereClause(dialect: Dialect, query: AppUserListQuery) {
  const parts = [sql`au.app_id = ${query.appId}`];
  if (query.status) parts.push(sql`au.list_status = ${query.status}`);
  if (query.q) {
    if (dialect === 'sqlite' && [...query.q].length >= TRIGRAM_MIN) parts.push(sql`app_users_fts MATCH ${ftsPhrase(query.q.toLowerCase())}`);
    else parts.push(searchCondition(dialect, query.q));
  }
  return sql.join(parts, sql` AND `);
}

/** The users of an app with every column an item of the listing shows. */
function membersOf(db: Kysely<Database>, appId: string) {
  return db
    .selectFrom('app_users as au')
    .innerJoin('users as u', 'u.id', 'au.user_id')
    .select((eb) => [
      'au.user_id',
      'au.list_status',
      'au.created_at',
      'au.last_login_at',
      'u.email',
      'u.name',
      'u.email_verified',
      'u.deletion_scheduled_at',
      eb.exists(eb.selectFrom('provider_identities as pi').select('pi.id').whereRef('pi.user_id', '=', 'au.user_id')).as('idp_bound'),
    ])
    .where('au.app_id', '=', appId);
}

/** Exact number of the app's users, optionally with one list status, from the trigger-kept counters. */
export async function countAppUsers(db: Kysely<Database>, appId: string, status?: ListStatus): Promise<number> {
  let q = db.selectFrom('app_user_counts').select((eb) => eb.fn.sum<number | string | null>('n').as('n')).where('app_id', '=', appId);
  if (status) q = q.where('list_status', '=', status);
  const row = await q.executeTakeFirst();
  return Number(row?.n ?? 0);
}

export async function listAppUsers(
  db: Kysely<Database>,
  dialect: Dialect,
  query: AppUserListQuery,
): Promise<{ items: AppUserListRow[]; total: number }> {
  const from = fromClause(dialect, query.q);
  const where = whereClause(dialect, query);
  const offset = (query.page - 1) * query.pageSize;

  let ids: string[];
  let total: number;
  if (query.q) {
    // One pass over the matches gives both the page and the exact total (the window count is taken
    // before LIMIT); only a page past the end needs a separate count.
    const page = await sql<{ user_id: string; total: number | string }>`
      SELECT au.user_id, count(*) OVER () AS total FROM ${from} WHERE ${where}
      ORDER BY au.created_at DESC, au.user_id DESC
      LIMIT ${query.pageSize} OFFSET ${offset}`.execute(db);
    ids = page.rows.map((r) => r.user_id);
    total = page.rows.length
      ? Number(page.rows[0]!.total)
      : Number((await sql<{ n: number | string }>`SELECT count(*) AS n FROM ${from} WHERE ${where}`.execute(db)).rows[0]?.n ?? 0);
  } else {
    total = await countAppUsers(db, query.appId, query.status);
    if (offset >= total) return { items: [], total };
    const page = await sql<{ user_id: string }>`
      SELECT au.user_id FROM ${from} WHERE ${where}
      ORDER BY au.created_at DESC, au.user_id DESC
      LIMIT ${query.pageSize} OFFSET ${offset}`.execute(db);
    ids = page.rows.map((r) => r.user_id);
  }
  if (ids.length === 0) return { items: [], total };

  const rows = await membersOf(db, query.appId).where('au.user_id', 'in', ids).execute();
  const byId = new Map(rows.map((r) => [r.user_id, r]));
  const items: AppUserListRow[] = [];
  for (const id of ids) {
    const r = byId.get(id);
    if (!r) continue; // deleted between the two reads
    items.push(toRow(r));
  }
  return { items, total };
}

/** One member of an app as the listing shows it; undefined when the user is not a user of that app. */
export async function findAppUserListRow(db: Kysely<Database>, appId: string, userId: string): Promise<AppUserListRow | undefined> {
  const r = await membersOf(db, appId).where('au.user_id', '=', userId).executeTakeFirst();
  return r && toRow(r);
}

function toRow(r: {
  user_id: string;
  list_status: ListStatus;
  created_at: number;
  last_login_at: number | null;
  email: string;
  name: string | null;
  email_verified: number;
  deletion_scheduled_at: number | null;
  idp_bound: unknown;
}): AppUserListRow {
  return {
    id: r.user_id,
    email: r.email,
    name: r.name,
    status: r.list_status,
    emailVerified: Number(r.email_verified) === 1,
    idpBound: r.idp_bound === true || Number(r.idp_bound) === 1,
    createdAt: Number(r.created_at),
    lastLoginAt: r.last_login_at === null ? null : Number(r.last_login_at),
    deletionScheduledAt: r.deletion_scheduled_at === null ? null : Number(r.deletion_scheduled_at),
  };
}
