import { type Expression, type InferResult, type Insertable, type Kysely, type SelectQueryBuilder, sql } from 'kysely';
import { type App, type AppAccess, toApp, toAppAccess } from './apps.js';
import { precompiled } from '../precompiled.js';
import { inTransaction } from '../transaction.js';
import { type ProfileRecord, toProfileRecord } from './profiles.js';
import type { AppRow, AuthorizationCodesTable, Database, GrantRow, GrantsTable, RefreshTokenRow, RefreshTokensTable, UserRow } from '../schema.js';
import { COLUMNS, qualified } from '../columns.js';
import { enqueueLogouts, type EndedSignIn } from './logout-deliveries.js';
import type { Dialect } from '../connect.js';

export type { GrantRow, RefreshTokenRow };


// Grants (`sid`) ------------------------------------------------------------------------------------

const insertGrantRow = precompiled(
  (db, id: string, appId: string, userId: string, scope: string, authTime: number, amr: string | null, nonce: string | null, createdAt: number, expiresAt: number, revokedAt: number | null, revokedReason: string | null, awaiting: number, userAgent: string | null, ipArea: string | null, dpopJkt: string | null, sid: string | null, resources: string | null) =>
    db.insertInto('grants').values({
      id, app_id: appId, user_id: userId, scope, auth_time: authTime, amr, nonce, created_at: createdAt, expires_at: expiresAt,
      revoked_at: revokedAt, revoked_reason: revokedReason, awaiting_completion: awaiting, user_agent: userAgent, ip_area: ipArea, dpop_jkt: dpopJkt, sid, resources,
    }),
);

export async function insertGrant(db: Kysely<Database>, g: Insertable<GrantsTable>): Promise<void> {
  await insertGrantRow(
    db, g.id, g.app_id, g.user_id, g.scope, g.auth_time, g.amr ?? null, g.nonce ?? null, g.created_at, g.expires_at, g.revoked_at ?? null,
    g.revoked_reason ?? null, g.awaiting_completion ?? AWAITING.nothing, g.user_agent ?? null, g.ip_area ?? null, g.dpop_jkt ?? null, g.sid ?? null, g.resources ?? null,
  );
}

export async function findGrant(db: Kysely<Database>, id: string): Promise<GrantRow | undefined> {
  return db.selectFrom('grants').select(COLUMNS.grants).where('id', '=', id).executeTakeFirst();
}

/**
 * `grants.awaiting_completion`: what a grant still waits for. A REST sign-in that is `pending` (profile
 * data, a verified address) may be finished once by `/v1/auth/profile/complete`; a grant waiting for a
 * second factor is no credential at all (its session JWT is refused as a bearer) until the factor is given.
 */
export const AWAITING = { nothing: 0, restSignIn: 1, secondFactor: 2 } as const;
export type Awaiting = (typeof AWAITING)[keyof typeof AWAITING];

/** The liveness rule of grants: not revoked, its absolute lifetime not passed, its user active (isGrantLive's WHERE). */
export function isLiveGrant(grant: Pick<GrantRow, 'revoked_at' | 'expires_at'>, user: Pick<UserRow, 'status'>, now: number): boolean {
  return grant.revoked_at === null && grant.expires_at > now && user.status === 'active';
}

/** True when the grant exists and is live (isLiveGrant, evaluated in the database). */
export async function isGrantLive(db: Kysely<Database>, id: string, now: number): Promise<boolean> {
  const row = await db
    .selectFrom('grants')
    .innerJoin('users', 'users.id', 'grants.user_id')
    .select(['grants.id'])
    .where('grants.id', '=', id)
    .where('grants.revoked_at', 'is', null)
    .where('grants.expires_at', '>', now)
    .where('users.status', '=', 'active')
    .executeTakeFirst();
  return row !== undefined;
}

/** A live grant (isGrantLive's rule) with what a bearer check needs of it: its scope, what it awaits, its app. */
export interface LiveGrant {
  scope: string;
  awaiting: number;
  app: AppAccess;
}

/**
 * How a bearer check reads a grant if it is live: one grant, or many in one statement (on PostgreSQL,
 * concurrent bearer checks share a statement, a round trip being most of a check's cost there; see
 * TokenService). Both evaluate isGrantLive's rule in the database, at `now`, and read the same columns.
 */
export interface LiveGrantReader<G extends LiveGrant> {
  one(db: Kysely<Database>, id: string, now: number): Promise<G | undefined>;
  /** The live ones among `ids`, by id (an id that is not live, or not a grant, is absent). */
  many(db: Kysely<Database>, ids: readonly string[], now: number): Promise<Map<string, G>>;
}

/**
 * The grant `id` names (a value, or the lateral lookup's column in `many`) with its user and app, if
 * live (isGrantLive's rule), selecting what a LiveGrant holds: what every LiveGrantReader selects
 * from. Only AppAccess's four app columns: a bearer read runs this on every request, and reading the
 * whole app row, its JSON columns parsed, made the SQLite bearer read 15% slower.
 */
function liveGrantQuery(db: Kysely<Database>, id: string | Expression<string>, now: number) {
  return db
    .selectFrom('grants as g')
    .innerJoin('users as u', 'u.id', 'g.user_id')
    .innerJoin('apps as a', 'a.id', 'g.app_id')
    .where('g.id', '=', id)
    .where('g.revoked_at', 'is', null)
    .where('g.expires_at', '>', now)
    .where('u.status', '=', 'active')
    .select(['g.id as g_id', 'a.id', 'a.disabled', 'a.feature_auth', 'a.feature_profile', 'g.scope as g_scope', 'g.awaiting_completion as g_awaiting']);
}

type LiveGrantRow = InferResult<ReturnType<typeof liveGrantQuery>>[number];

const toLiveGrant = (row: LiveGrantRow): LiveGrant => ({ scope: row.g_scope, awaiting: row.g_awaiting, app: toAppAccess(row) });

/**
 * The LiveGrantReader of a query built on liveGrantQuery, its rows mapped by `toGrant`: `one` compares
 * the grant id, `many` takes an array parameter (one statement text for any number of ids; PostgreSQL
 * only).
 */
function liveGrantReader<DB, TB extends keyof DB, R extends LiveGrantRow, G extends LiveGrant>(
  query: (db: Kysely<Database>, id: string | Expression<string>, now: number) => SelectQueryBuilder<DB, TB, R>,
  toGrant: (row: R) => G,
): LiveGrantReader<G> {
  const selectOne = precompiled((db, id: string, now: number) => query(db, id, now));
  // Each id looked up on its own in a lateral join, by the primary key as `one` does: with `g.id = any($1)`
  // the planner may instead reach the grants through their users, every grant of a user read per batch
  // (Kysely embeds the subquery in parentheses.)
  const selectMany = precompiled((db, ids: readonly string[], now: number) => ({
    compile: () =>
      sql<R>`select live.* from unnest(${ids}::text[]) as asked(id) cross join lateral ${query(db.withoutPlugins(), sql.ref<string>('asked.id'), now)} as live`.compile(db),
  }));
  return {
    async one(db, id, now) {
      const row = (await selectOne(db, id, now)).rows[0];
      return row && toGrant(row);
    },
    async many(db, ids, now) {
      return new Map((await selectMany(db, ids, now)).rows.map((row) => [row.g_id, toGrant(row)]));
    },
  };
}

/** The grant if it is live, with its app, in one query (a bearer read then needs no second one for the app). */
export const liveGrants = liveGrantReader(liveGrantQuery, toLiveGrant);

/** A live grant and the profile document its app keeps for the grant's user, if there is one. */
export interface LiveGrantWithProfile extends LiveGrant {
  profile: ProfileRecord | undefined;
}

/**
 * liveGrantQuery, and in the same statement the profile document the grant's app keeps for
 * the grant's user (the token's subject): a bearer read of `/v1/profile/{userId}` is one statement, the
 * liveness check included. Nothing from the request reaches the statement but the grant id.
 */
function liveGrantWithProfileQuery(db: Kysely<Database>, id: string | Expression<string>, now: number) {
  return liveGrantQuery(db, id, now)
    .leftJoin('profiles as p', (join) => join.onRef('p.app_id', '=', 'g.app_id').onRef('p.user_id', '=', 'g.user_id'))
    .select([
      'p.user_id as p_user_id',
      'p.data as p_data',
      'p.version as p_version',
      'p.created_at as p_created_at',
      'p.updated_at as p_updated_at',
    ]);
}

function toLiveGrantWithProfile(row: InferResult<ReturnType<typeof liveGrantWithProfileQuery>>[number]): LiveGrantWithProfile {
  const profile =
    row.p_user_id === null
      ? undefined
      : toProfileRecord({ app_id: row.id, user_id: row.p_user_id, data: row.p_data!, version: row.p_version!, created_at: row.p_created_at!, updated_at: row.p_updated_at! });
  return Object.assign(toLiveGrant(row), { profile }); // not a spread: one hidden class for every row, see toApp
}

/** liveGrants, each with its user's profile document (liveGrantWithProfileQuery). */
export const liveGrantsWithProfile = liveGrantReader(liveGrantWithProfileQuery, toLiveGrantWithProfile);

/**
 * Revocations that tell no app by back-channel logout: the app asked itself (RFC 7009), or the grant was
 * revoked as it was created, before any token of it left (docs/guides/back-channel-logout.md).
 */
const SILENT_REVOCATIONS: ReadonlySet<string> = new Set(['revoked_by_client', 'code_basis_changed']);

/** Queues the back-channel logouts of the sign-ins a revocation just ended (in its transaction). */
async function afterRevocation(db: Kysely<Database>, at: number, reason: string, ended: readonly EndedSignIn[]): Promise<void> {
  if (!SILENT_REVOCATIONS.has(reason)) await enqueueLogouts(db, at, ended);
}

/** Revokes one grant; its app gets a back-channel logout token when it listens for them. */
export async function revokeGrant(db: Kysely<Database>, id: string, at: number, reason: string): Promise<void> {
  const ended = await db
    .updateTable('grants')
    .set({ revoked_at: at, revoked_reason: reason })
    .where('id', '=', id)
    .where('revoked_at', 'is', null)
    .returning(['app_id', 'user_id', 'sid'])
    .execute();
  await afterRevocation(db, at, reason, ended);
}

/**
 * Revokes every grant of a user (optionally only for one app): all their refresh tokens and sessions
 * die, and so do the authorization codes not yet redeemed (they expire now), so a code issued just
 * before a password reset or a consent revocation never yields tokens. Each app whose sign-ins ended
 * gets a back-channel logout token per session when it listens for them.
 */
export async function revokeGrantsOfUser(db: Kysely<Database>, userId: string, at: number, reason: string, appId?: string): Promise<void> {
  let grants = db.updateTable('grants').set({ revoked_at: at, revoked_reason: reason }).where('user_id', '=', userId).where('revoked_at', 'is', null);
  let codes = db.updateTable('authorization_codes').set({ expires_at: at }).where('user_id', '=', userId).where('consumed_at', 'is', null).where('expires_at', '>', at);
  if (appId) {
    grants = grants.where('app_id', '=', appId);
    codes = codes.where('app_id', '=', appId);
  }
  const ended = await grants.returning(['app_id', 'user_id', 'sid']).execute();
  await codes.execute();
  await afterRevocation(db, at, reason, ended);
}

/**
 * Revokes the grants a browser session signed in (those carrying its `sid`) and its codes not yet
 * redeemed: signing out of the browser signs out of the apps signed in through it (single logout).
 */
export async function revokeGrantsOfSession(db: Kysely<Database>, userId: string, sid: string, at: number, reason: string): Promise<EndedSignIn[]> {
  const ended = await db
    .updateTable('grants')
    .set({ revoked_at: at, revoked_reason: reason })
    .where('user_id', '=', userId)
    .where('sid', '=', sid)
    .where('revoked_at', 'is', null)
    .returning(['app_id', 'user_id', 'sid'])
    .execute();
  await db.updateTable('authorization_codes').set({ expires_at: at }).where('user_id', '=', userId).where('sid', '=', sid).where('consumed_at', 'is', null).where('expires_at', '>', at).execute();
  await afterRevocation(db, at, reason, ended);
  return ended;
}

/** Moves a grant waiting for `from` on to `set`, once: exactly one concurrent caller wins. */
async function advancePending(db: Kysely<Database>, id: string, from: Awaiting, set: { awaiting_completion: Awaiting; amr?: string }): Promise<boolean> {
  const result = await db.updateTable('grants').set(set).where('id', '=', id).where('awaiting_completion', '=', from).executeTakeFirst();
  return Number(result.numUpdatedRows) === 1;
}

/** A pending REST sign-in completes (its tokens are issued in the same transaction). */
export const finishPendingGrant = (db: Kysely<Database>, id: string) => advancePending(db, id, AWAITING.restSignIn, { awaiting_completion: AWAITING.nothing });

/**
 * A pending REST sign-in that needs a second factor only now (the app requires one, and the user's
 * address was just proven, so one can be enrolled): it waits for the factor first.
 */
export const awaitSecondFactor = (db: Kysely<Database>, id: string) => advancePending(db, id, AWAITING.restSignIn, { awaiting_completion: AWAITING.secondFactor });

/**
 * Records the second factor on a grant that waits for one, and what it waits for next (a REST sign-in
 * goes on to its other pending steps; a provider session is then complete).
 */
export const recordSecondFactor = (db: Kysely<Database>, id: string, amr: string, next: Awaiting) => advancePending(db, id, AWAITING.secondFactor, { amr, awaiting_completion: next });

// Refresh tokens -------------------------------------------------------------------------------------

const insertRefreshTokenRow = precompiled(
  (db, hash: string, grantId: string, appId: string, scope: string, createdAt: number, expiresAt: number, consumedAt: number | null, successorResponse: string | null, successorHash: string | null) =>
    db.insertInto('refresh_tokens').values({
      token_hash: hash, grant_id: grantId, app_id: appId, scope, created_at: createdAt, expires_at: expiresAt, consumed_at: consumedAt,
      successor_response: successorResponse, successor_hash: successorHash,
    }),
);

export async function insertRefreshToken(db: Kysely<Database>, t: Insertable<RefreshTokensTable>): Promise<void> {
  await insertRefreshTokenRow(
    db, t.token_hash, t.grant_id, t.app_id, t.scope, t.created_at, t.expires_at, t.consumed_at ?? null, t.successor_response ?? null, t.successor_hash ?? null,
  );
}

export async function findRefreshToken(db: Kysely<Database>, tokenHash: string): Promise<RefreshTokenRow | undefined> {
  return db.selectFrom('refresh_tokens').select(COLUMNS.refresh_tokens).where('token_hash', '=', tokenHash).executeTakeFirst();
}

/**
 * A refresh token with its grant and the grant's user: what a rotation reads (TokenService.refresh), in
 * one query. Only the columns a rotation uses: every refresh reads this, and each further column is read
 * and materialised for nothing (the replay reads the token whole again, findRefreshToken).
 */
export interface RefreshFamily {
  token: Pick<RefreshTokenRow, 'token_hash' | 'grant_id' | 'app_id' | 'scope' | 'expires_at' | 'consumed_at'>;
  grant: Pick<GrantRow, 'id' | 'app_id' | 'user_id' | 'scope' | 'auth_time' | 'amr' | 'expires_at' | 'revoked_at' | 'dpop_jkt' | 'sid' | 'resources'>;
  /** What the liveness rule (isLiveGrant) and the tokens (ID token claims) read of the user. */
  user: Pick<UserRow, 'id' | 'email' | 'email_verified' | 'name' | 'status'>;
}

/** The columns of a refresh family (RefreshFamily), read from the token `t`, its grant `g` and the grant's user `u`. */
const REFRESH_FAMILY_COLUMNS = [
  't.token_hash as t_token_hash', 't.grant_id as t_grant_id', 't.app_id as t_app_id', 't.scope as t_scope', 't.expires_at as t_expires_at',
  't.consumed_at as t_consumed_at',
  'g.app_id as g_app_id', 'g.user_id as g_user_id', 'g.scope as g_scope', 'g.auth_time as g_auth_time', 'g.amr as g_amr',
  'g.expires_at as g_expires_at', 'g.revoked_at as g_revoked_at', 'g.dpop_jkt as g_dpop_jkt', 'g.sid as g_sid', 'g.resources as g_resources',
  'u.email as u_email', 'u.email_verified as u_email_verified', 'u.name as u_name', 'u.status as u_status',
] as const;

/**
 * The refresh family of `tokenHash`: read alone, or joined to the presenting app (as a subquery, built
 * without plugins: they transform the statement they are part of, not each of its parts).
 */
function refreshFamilyQuery(db: Kysely<Database>, tokenHash: string | Expression<string>) {
  return db
    .selectFrom('refresh_tokens as t')
    .innerJoin('grants as g', 'g.id', 't.grant_id')
    .innerJoin('users as u', 'u.id', 'g.user_id')
    .select(REFRESH_FAMILY_COLUMNS)
    .where('t.token_hash', '=', tokenHash);
}

const selectRefreshFamily = precompiled((db, tokenHash: string) => refreshFamilyQuery(db, tokenHash));

type RefreshFamilyRow = Awaited<ReturnType<typeof selectRefreshFamily>>['rows'][number];

function toRefreshFamily(row: RefreshFamilyRow): RefreshFamily {
  return {
    token: { token_hash: row.t_token_hash, grant_id: row.t_grant_id, app_id: row.t_app_id, scope: row.t_scope, expires_at: row.t_expires_at, consumed_at: row.t_consumed_at },
    grant: {
      id: row.t_grant_id, app_id: row.g_app_id, user_id: row.g_user_id, scope: row.g_scope, auth_time: row.g_auth_time, amr: row.g_amr,
      expires_at: row.g_expires_at, revoked_at: row.g_revoked_at, dpop_jkt: row.g_dpop_jkt, sid: row.g_sid, resources: row.g_resources,
    },
    user: { id: row.g_user_id, email: row.u_email, email_verified: row.u_email_verified, name: row.u_name, status: row.u_status },
  };
}

export async function findRefreshFamily(db: Kysely<Database>, tokenHash: string): Promise<RefreshFamily | undefined> {
  const row = (await selectRefreshFamily(db, tokenHash)).rows[0];
  return row && toRefreshFamily(row);
}

/** An app, and the family of the refresh token it presented (undefined when no token has that hash). */
export type AppWithRefreshFamily = App & { refreshFamily: RefreshFamily | undefined };

/**
 * The app `appId` and, in the same statement, the refresh family of `tokenHash` (whichever app the token
 * belongs to: the caller decides): a refresh grant reads its client and its token in one round trip.
 * Undefined when there is no such app.
 */
const selectAppWithRefreshFamily = precompiled((db, appId: string, tokenHash: string) =>
  db
    .selectFrom('apps as a')
    .leftJoin(refreshFamilyQuery(db.withoutPlugins(), tokenHash).as('f'), (join) => join.onTrue())
    .select(qualified('a', COLUMNS.apps))
    .selectAll('f')
    .where('a.id', '=', appId),
);

export async function findAppWithRefreshFamily(db: Kysely<Database>, appId: string, tokenHash: string): Promise<AppWithRefreshFamily | undefined> {
  const row = (await selectAppWithRefreshFamily(db, appId, tokenHash)).rows[0];
  if (!row) return undefined;
  return withRefreshFamily(row);
}

/**
 * The (app, key) pairs of a batched client read, numbered in the order asked (`pair.i`, from 1): what
 * findAppsWithRefreshFamilies and findAppsWithCodeRedemptions start from. PostgreSQL only. (Its alias
 * must not be one the joined reads use for a table of their own.)
 */
function askedPairs(appIds: readonly string[], keys: readonly string[]) {
  return sql<{ app_id: string; key: string; i: string }>`unnest(${appIds}::text[], ${keys}::text[]) with ordinality`.as<'pair'>(sql`pair(app_id, key, i)`);
}

/** A batched client read's answers in the order asked (`pair_i`); undefined where the app does not exist. */
function inAskedOrder<R extends { pair_i: string }, A>(rows: readonly R[], count: number, toAnswer: (row: R) => A): Array<A | undefined> {
  const answers = new Array<A | undefined>(count);
  for (const row of rows) answers[Number(row.pair_i) - 1] = toAnswer(row);
  return answers;
}

/**
 * A batched client read: for each (app, key) pair asked, the app and, joined laterally, what `joined`
 * reads for the key (findAppsWithRefreshFamilies, findAppsWithCodeRedemptions). PostgreSQL only.
 * `offset 0` keeps the lateral subquery whole, planned on its own for one key: each key is looked up by
 * its primary key, never by joining the whole table (as the flattened join did on a table without
 * statistics), and the statement plans in about half the time (PostgreSQL plans it anew on most calls).
 */
function selectAppsWith<DB, TB extends keyof DB, O>(joined: (db: Kysely<Database>, key: Expression<string>) => SelectQueryBuilder<DB, TB, O>) {
  return precompiled((db, appIds: readonly string[], keys: readonly string[]) =>
    db
      .selectFrom(askedPairs(appIds, keys))
      .innerJoin('apps as a', 'a.id', 'pair.app_id')
      .leftJoinLateral(joined(db.withoutPlugins(), sql.ref<string>('pair.key')).offset(sql.lit(0)).as('j'), (join) => join.onTrue())
      .select(qualified('a', COLUMNS.apps))
      .selectAll('j')
      .select('pair.i as pair_i'),
  );
}

/** findAppWithRefreshFamily for many (app, token hash) pairs in one statement: concurrent refresh grants share it (TokenService). */
const selectAppsWithRefreshFamilies = selectAppsWith(refreshFamilyQuery);

export async function findAppsWithRefreshFamilies(
  db: Kysely<Database>,
  asked: ReadonlyArray<{ appId: string; tokenHash: string }>,
): Promise<Array<AppWithRefreshFamily | undefined>> {
  const { rows } = await selectAppsWithRefreshFamilies(db, asked.map((a) => a.appId), asked.map((a) => a.tokenHash));
  return inAskedOrder(rows, asked.length, withRefreshFamily);
}

/** The app of a joined client read with the family it found (Object.assign, not a spread, as toApp). */
function withRefreshFamily<R extends AppRow & { t_token_hash: string | null }>(row: R): AppWithRefreshFamily {
  return Object.assign(toApp(row), { refreshFamily: hasRefreshFamily(row) ? toRefreshFamily(row) : undefined });
}

/** Whether the outer join found the family (its columns are then as selectRefreshFamily reads them). */
function hasRefreshFamily<R extends { t_token_hash: string | null }>(row: R): row is R & RefreshFamilyRow {
  return row.t_token_hash !== null;
}

/** One rotation of a refresh token: the token, when, the response replayed in the grace window (sealed), its successor's row. */
export interface Rotation {
  tokenHash: string;
  at: number;
  sealedResponse: string;
  successor: Insertable<RefreshTokensTable>;
}

const updateRotation = precompiled((db, tokenHash: string, at: number, sealedResponse: string, successorHash: string) =>
  db
    .updateTable('refresh_tokens')
    .set({ consumed_at: at, successor_response: sealedResponse, successor_hash: successorHash })
    .where('token_hash', '=', tokenHash)
    .where('consumed_at', 'is', null),
);

/** The columns of `rows`, one array per pick: the parameters of a statement over `unnest` of the rows. */
function columnsOf<R, P extends Array<(row: R) => unknown>>(rows: readonly R[], ...picks: P): { [K in keyof P]: Array<ReturnType<P[K]>> } {
  return picks.map((pick) => rows.map(pick)) as { [K in keyof P]: Array<ReturnType<P[K]>> };
}

/**
 * PostgreSQL's rotations (rotateRefreshTokens) as one data-modifying statement over `unnest` of the
 * rotations, atomic: a token asked twice is rotated once (`distinct on`). The UPDATE re-checks
 * `consumed_at is null` on the row it locks, so a token rotated meanwhile by another statement is lost
 * here. Two statements that lock the same tokens in opposite orders deadlock; PostgreSQL then fails one,
 * which changes nothing (the caller runs its rotations again one by one).
 */
const rotateInOneStatement = precompiled(
  (
    db,
    tokenHashes: readonly string[], ats: readonly number[], sealedResponses: readonly string[], successorHashes: readonly string[],
    grantIds: readonly string[], appIds: readonly string[], scopes: readonly string[], createdAts: readonly number[], expiresAts: readonly number[],
  ) => ({
    compile: () =>
      sql<{ token_hash: string }>`
        with asked as (
          select distinct on (token_hash) * from unnest(
            ${tokenHashes}::text[], ${ats}::bigint[], ${sealedResponses}::text[], ${successorHashes}::text[],
            ${grantIds}::text[], ${appIds}::text[], ${scopes}::text[], ${createdAts}::bigint[], ${expiresAts}::bigint[]
          ) as r(token_hash, at, sealed_response, successor_hash, grant_id, app_id, scope, created_at, expires_at)
        ),
        rotated as (
          update refresh_tokens t set consumed_at = r.at, successor_response = r.sealed_response, successor_hash = r.successor_hash
          from asked r
          where t.token_hash = r.token_hash and t.consumed_at is null
          returning r.successor_hash, r.grant_id, r.app_id, r.scope, r.created_at, r.expires_at
        )
        insert into refresh_tokens (token_hash, grant_id, app_id, scope, created_at, expires_at)
        select successor_hash, grant_id, app_id, scope, created_at, expires_at from rotated
        returning token_hash`.compile(db),
  }),
);

/**
 * Rotates refresh tokens: each is marked consumed, with its successor (and the sealed response replayed
 * inside the grace window) recorded and the successor's row stored; exactly one rotation of a token wins.
 * Returns the successor hashes stored, those of the rotations that won. All of them or none: on
 * PostgreSQL one statement (rotateInOneStatement), on SQLite one transaction whose conditional UPDATEs
 * decide the winners (docs/adr/0004-coalesced-statements.md says why grants share their writes).
 */
export async function rotateRefreshTokens(db: Kysely<Database>, dialect: Dialect, rotations: readonly Rotation[]): Promise<Set<string>> {
  if (dialect === 'sqlite') {
    return inTransaction(db, async (trx) => {
      const won = new Set<string>();
      for (const { tokenHash, at, sealedResponse, successor } of rotations) {
        if ((await updateRotation(trx, tokenHash, at, sealedResponse, successor.token_hash)).numAffectedRows !== 1n) continue;
        await insertRefreshToken(trx, successor);
        won.add(successor.token_hash);
      }
      return won;
    });
  }
  const { rows } = await rotateInOneStatement(
    db,
    ...columnsOf(
      rotations,
      (r) => r.tokenHash,
      (r) => r.at,
      (r) => r.sealedResponse,
      (r) => r.successor.token_hash,
      (r) => r.successor.grant_id,
      (r) => r.successor.app_id,
      (r) => r.successor.scope,
      (r) => r.successor.created_at,
      (r) => r.successor.expires_at,
    ),
  );
  return new Set(rows.map((row) => row.token_hash));
}

// Authorization codes --------------------------------------------------------------------------------

export type AuthorizationCodeRow = AuthorizationCodesTable;

export async function insertAuthorizationCode(db: Kysely<Database>, code: Insertable<AuthorizationCodesTable>): Promise<void> {
  await db.insertInto('authorization_codes').values(code).execute();
}

const selectAuthorizationCode = precompiled((db, codeHash: string) => db.selectFrom('authorization_codes').select(COLUMNS.authorization_codes).where('code_hash', '=', codeHash));

export async function findAuthorizationCode(db: Kysely<Database>, codeHash: string): Promise<AuthorizationCodeRow | undefined> {
  return (await selectAuthorizationCode(db, codeHash)).rows[0];
}

/**
 * A code and what its redemption is judged on (sign-in policy: codeBasisProblem): its user, the user's
 * membership of the code's app and the scope the user consented to there.
 */
export interface CodeRedemption {
  code: AuthorizationCodeRow;
  user: UserRow | undefined;
  membership: { status: 'active' | 'blocked' } | undefined;
  consentedScope: string;
}

/** A user's columns (all but its id) as the code's redemption selects them from `u`, prefixed `u_`: the sign-in policy judges the whole user. */
const USER_COLUMNS = [
  'u.email as u_email', 'u.email_verified as u_email_verified', 'u.password_hash as u_password_hash', 'u.name as u_name',
  'u.phone_number as u_phone_number', 'u.birthdate as u_birthdate', 'u.status as u_status', 'u.password_changed_at as u_password_changed_at',
  'u.created_at as u_created_at', 'u.updated_at as u_updated_at', 'u.deletion_scheduled_at as u_deletion_scheduled_at', 'u.locale as u_locale',
] as const;

/** The columns of a code's redemption (CodeRedemption), read from the code row `c` and what it joins. */
const REDEMPTION_COLUMNS = [
  'c.code_hash as c_code_hash', 'c.app_id as c_app_id', 'c.user_id as c_user_id', 'c.redirect_uri as c_redirect_uri', 'c.scope as c_scope',
  'c.code_challenge as c_code_challenge', 'c.nonce as c_nonce', 'c.auth_time as c_auth_time', 'c.amr as c_amr', 'c.created_at as c_created_at',
  'c.expires_at as c_expires_at', 'c.consumed_at as c_consumed_at', 'c.grant_id as c_grant_id', 'c.user_agent as c_user_agent', 'c.ip_area as c_ip_area',
  'c.dpop_jkt as c_dpop_jkt', 'c.sid as c_sid', 'c.resources as c_resources',
  'u.id as u_id', ...USER_COLUMNS,
  'm.status as m_status', 'k.scope as k_scope',
] as const;

/** The code `codeHash` with its redemption basis: read alone, or joined to the presenting app (as refreshFamilyQuery). */
function codeRedemptionQuery(db: Kysely<Database>, codeHash: string | Expression<string>) {
  return db
    .selectFrom('authorization_codes as c')
    .leftJoin('users as u', 'u.id', 'c.user_id')
    .leftJoin('app_users as m', (join) => join.onRef('m.app_id', '=', 'c.app_id').onRef('m.user_id', '=', 'c.user_id'))
    .leftJoin('consents as k', (join) => join.onRef('k.app_id', '=', 'c.app_id').onRef('k.user_id', '=', 'c.user_id'))
    .select(REDEMPTION_COLUMNS)
    .where('c.code_hash', '=', codeHash);
}

const selectCodeRedemption = precompiled((db, codeHash: string) => codeRedemptionQuery(db, codeHash));

type RedemptionRow = Awaited<ReturnType<typeof selectCodeRedemption>>['rows'][number];

function toCodeRedemption(row: RedemptionRow): CodeRedemption {
  const code: AuthorizationCodeRow = {
    code_hash: row.c_code_hash, app_id: row.c_app_id, user_id: row.c_user_id, redirect_uri: row.c_redirect_uri, scope: row.c_scope,
    code_challenge: row.c_code_challenge, nonce: row.c_nonce, auth_time: row.c_auth_time, amr: row.c_amr, created_at: row.c_created_at,
    expires_at: row.c_expires_at, consumed_at: row.c_consumed_at, grant_id: row.c_grant_id, user_agent: row.c_user_agent, ip_area: row.c_ip_area,
    dpop_jkt: row.c_dpop_jkt, sid: row.c_sid, resources: row.c_resources,
  };
  const user: UserRow | undefined =
    row.u_id === null
      ? undefined
      : {
          id: row.u_id, email: row.u_email!, email_verified: row.u_email_verified!, password_hash: row.u_password_hash, name: row.u_name,
          phone_number: row.u_phone_number, birthdate: row.u_birthdate, status: row.u_status!, password_changed_at: row.u_password_changed_at,
          created_at: row.u_created_at!, updated_at: row.u_updated_at!, deletion_scheduled_at: row.u_deletion_scheduled_at, locale: row.u_locale,
        };
  return { code, user, membership: row.m_status === null ? undefined : { status: row.m_status }, consentedScope: row.k_scope ?? '' };
}

/** An app, and the redemption of the code it presented (undefined when no code has that hash). */
export type AppWithCodeRedemption = App & { codeRedemption: CodeRedemption | undefined };

/**
 * The app `appId` and, in the same statement, the code `codeHash` with its redemption basis (whichever
 * app the code belongs to: the caller decides): a code grant reads its client and its code in one round
 * trip. Undefined when there is no such app.
 */
const selectAppWithCodeRedemption = precompiled((db, appId: string, codeHash: string) =>
  db
    .selectFrom('apps as a')
    .leftJoin(codeRedemptionQuery(db.withoutPlugins(), codeHash).as('r'), (join) => join.onTrue())
    .select(qualified('a', COLUMNS.apps))
    .selectAll('r')
    .where('a.id', '=', appId),
);

export async function findAppWithCodeRedemption(db: Kysely<Database>, appId: string, codeHash: string): Promise<AppWithCodeRedemption | undefined> {
  const row = (await selectAppWithCodeRedemption(db, appId, codeHash)).rows[0];
  if (!row) return undefined;
  return withCodeRedemption(row);
}

/** findAppWithCodeRedemption for many (app, code hash) pairs in one statement: concurrent code grants share it (TokenService). */
const selectAppsWithCodeRedemptions = selectAppsWith(codeRedemptionQuery);

export async function findAppsWithCodeRedemptions(
  db: Kysely<Database>,
  asked: ReadonlyArray<{ appId: string; codeHash: string }>,
): Promise<Array<AppWithCodeRedemption | undefined>> {
  const { rows } = await selectAppsWithCodeRedemptions(db, asked.map((a) => a.appId), asked.map((a) => a.codeHash));
  return inAskedOrder(rows, asked.length, withCodeRedemption);
}

/** The app of a joined client read with the code it found (as withRefreshFamily). */
function withCodeRedemption<R extends AppRow & { c_code_hash: string | null }>(row: R): AppWithCodeRedemption {
  return Object.assign(toApp(row), { codeRedemption: hasCodeRedemption(row) ? toCodeRedemption(row) : undefined });
}

/** Whether the outer join found the code (its columns are then as selectCodeRedemption reads them). */
function hasCodeRedemption<R extends { c_code_hash: string | null }>(row: R): row is R & RedemptionRow {
  return row.c_code_hash !== null;
}

/** Single use: exactly one redemption or burn wins. */
const updateCodeConsumed = precompiled((db, codeHash: string, at: number) =>
  db.updateTable('authorization_codes').set({ consumed_at: at }).where('code_hash', '=', codeHash).where('consumed_at', 'is', null),
);

/** Consumes a code without redeeming it (a failed check burns it); false when it was already consumed. */
export async function burnAuthorizationCode(db: Kysely<Database>, codeHash: string, at: number): Promise<boolean> {
  return (await updateCodeConsumed(db, codeHash, at)).numAffectedRows === 1n;
}

/** Consumes a code for the grant it produces (linked, so a replay can revoke what the code produced); no change when already consumed. */
const updateCodeRedeemed = precompiled((db, codeHash: string, at: number, grantId: string) =>
  db.updateTable('authorization_codes').set({ consumed_at: at, grant_id: grantId }).where('code_hash', '=', codeHash).where('consumed_at', 'is', null),
);

/** One redemption of a code: the code, when, and the grant and first refresh token it stores if it wins. */
export interface Redemption {
  codeHash: string;
  at: number;
  grant: Insertable<GrantsTable>;
  refreshToken: Insertable<RefreshTokensTable>;
}

/** A consumed code as redeemInOneStatement's `consumed` holds it: the code's columns and what its redemption stores. */
type ConsumedCode = AuthorizationCodesTable & {
  g_app_id: string; g_user_id: string; g_scope: string; g_auth_time: number; g_amr: string | null; g_nonce: string | null; g_created_at: number;
  g_expires_at: number; g_revoked_at: number | null; g_revoked_reason: string | null; g_awaiting: number; g_dpop_jkt: string | null; g_sid: string | null;
  t_hash: string; t_grant_id: string; t_app_id: string; t_scope: string; t_created_at: number; t_expires_at: number;
};

/**
 * PostgreSQL's redemptions (redeemAuthorizationCodes) as one data-modifying statement over `unnest` of
 * the redemptions: each code consumed (`consumed_at is null` re-checked on the row it locks: exactly
 * one redemption or burn wins; a code asked twice in one statement is taken once, `distinct on`) and
 * linked to its new grant, the grant and its first refresh token stored only for the codes consumed
 * here, and each one's redemption basis as this statement saw it (its joins see the users,
 * memberships and consents committed before it), the grant id naming the redemption.
 */
const redeemInOneStatement = precompiled(
  (
    db, codeHashes: readonly string[], ats: readonly number[],
    ids: readonly string[], appIds: readonly string[], userIds: readonly string[], scopes: readonly string[], authTimes: readonly number[],
    amrs: readonly (string | null)[], nonces: readonly (string | null)[], createdAts: readonly number[], expiresAts: readonly number[],
    revokedAts: readonly (number | null)[], revokedReasons: readonly (string | null)[], awaitings: readonly number[],
    tokenHashes: readonly string[], tokenGrantIds: readonly string[], tokenAppIds: readonly string[], tokenScopes: readonly string[],
    tokenCreatedAts: readonly number[], tokenExpiresAts: readonly number[], dpopJkts: readonly (string | null)[], sids: readonly (string | null)[],
  ) =>
    db
      // Raw SQL is not parenthesised by Kysely as a CTE's body: the parentheses are part of the text.
      .with('consumed', () => sql<ConsumedCode>`(
        with asked as (
          select distinct on (code_hash) * from unnest(
            ${codeHashes}::text[], ${ats}::bigint[], ${ids}::text[], ${appIds}::text[], ${userIds}::text[], ${scopes}::text[], ${authTimes}::bigint[],
            ${amrs}::text[], ${nonces}::text[], ${createdAts}::bigint[], ${expiresAts}::bigint[], ${revokedAts}::bigint[], ${revokedReasons}::text[],
            ${awaitings}::integer[], ${tokenHashes}::text[], ${tokenGrantIds}::text[], ${tokenAppIds}::text[], ${tokenScopes}::text[],
            ${tokenCreatedAts}::bigint[], ${tokenExpiresAts}::bigint[], ${dpopJkts}::text[], ${sids}::text[]
          ) as r(code_hash, at, g_id, g_app_id, g_user_id, g_scope, g_auth_time, g_amr, g_nonce, g_created_at, g_expires_at, g_revoked_at,
                 g_revoked_reason, g_awaiting, t_hash, t_grant_id, t_app_id, t_scope, t_created_at, t_expires_at, g_dpop_jkt, g_sid)
        )
        update authorization_codes c set consumed_at = r.at, grant_id = r.g_id
        from asked r
        where c.code_hash = r.code_hash and c.consumed_at is null
        returning ${sql.join(qualified('c', COLUMNS.authorization_codes).map((column) => sql.ref(column)))}, r.g_app_id, r.g_user_id, r.g_scope, r.g_auth_time, r.g_amr, r.g_nonce, r.g_created_at, r.g_expires_at, r.g_revoked_at,
          r.g_revoked_reason, r.g_awaiting, r.t_hash, r.t_grant_id, r.t_app_id, r.t_scope, r.t_created_at, r.t_expires_at, r.g_dpop_jkt, r.g_sid)`)
      .with('g', () => sql`(
        insert into grants (id, app_id, user_id, scope, auth_time, amr, nonce, created_at, expires_at, revoked_at, revoked_reason, awaiting_completion, user_agent, ip_area, dpop_jkt, sid, resources)
        select grant_id, g_app_id, g_user_id, g_scope, g_auth_time, g_amr, g_nonce, g_created_at, g_expires_at, g_revoked_at, g_revoked_reason, g_awaiting, user_agent, ip_area, g_dpop_jkt, g_sid, resources
        from consumed)`)
      .with('t', () => sql`(
        insert into refresh_tokens (token_hash, grant_id, app_id, scope, created_at, expires_at)
        select t_hash, t_grant_id, t_app_id, t_scope, t_created_at, t_expires_at from consumed)`)
      .selectFrom('consumed as c')
      .leftJoin('users as u', 'u.id', 'c.user_id')
      .leftJoin('app_users as m', (join) => join.onRef('m.app_id', '=', 'c.app_id').onRef('m.user_id', '=', 'c.user_id'))
      .leftJoin('consents as k', (join) => join.onRef('k.app_id', '=', 'c.app_id').onRef('k.user_id', '=', 'c.user_id'))
      .select(REDEMPTION_COLUMNS),
);

/**
 * Redeems codes: each code consumed (exactly one redemption or burn wins), linked to its new grant, the
 * grant and its first refresh token stored; all of them or none. Returns, by grant id, the redemption
 * basis of each redemption that consumed its code, as the consuming statement saw it, for the caller to
 * judge again (what it judged before may have changed since); the others consumed and stored nothing.
 * PostgreSQL: one statement (redeemInOneStatement); SQLite: one transaction.
 */
export async function redeemAuthorizationCodes(db: Kysely<Database>, dialect: Dialect, redemptions: readonly Redemption[]): Promise<Map<string, CodeRedemption>> {
  if (dialect === 'sqlite') {
    return inTransaction(db, async (trx) => {
      const won = new Map<string, CodeRedemption>();
      for (const { codeHash, at, grant, refreshToken } of redemptions) {
        if ((await updateCodeRedeemed(trx, codeHash, at, grant.id)).numAffectedRows !== 1n) continue;
        const basis = (await selectCodeRedemption(trx, codeHash)).rows[0];
        await insertGrant(trx, grant);
        await insertRefreshToken(trx, refreshToken);
        if (basis) won.set(grant.id, toCodeRedemption(basis));
      }
      return won;
    });
  }
  const { rows } = await redeemInOneStatement(
    db,
    ...columnsOf(
      redemptions,
      (r) => r.codeHash,
      (r) => r.at,
      (r) => r.grant.id,
      (r) => r.grant.app_id,
      (r) => r.grant.user_id,
      (r) => r.grant.scope,
      (r) => r.grant.auth_time,
      (r) => r.grant.amr ?? null,
      (r) => r.grant.nonce ?? null,
      (r) => r.grant.created_at,
      (r) => r.grant.expires_at,
      (r) => r.grant.revoked_at ?? null,
      (r) => r.grant.revoked_reason ?? null,
      (r) => r.grant.awaiting_completion ?? AWAITING.nothing,
      (r) => r.refreshToken.token_hash,
      (r) => r.refreshToken.grant_id,
      (r) => r.refreshToken.app_id,
      (r) => r.refreshToken.scope,
      (r) => r.refreshToken.created_at,
      (r) => r.refreshToken.expires_at,
      (r) => r.grant.dpop_jkt ?? null,
      (r) => r.grant.sid ?? null,
    ),
  );
  return new Map(rows.map((row) => [row.c_grant_id!, toCodeRedemption(row)]));
}

