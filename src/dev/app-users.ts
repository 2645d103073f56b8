import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import { AppError } from '../errors.js';
import { type RequestContext, requestContext } from '../shared/request-context.js';
import type { Kysely } from 'kysely';
import type { Dialect } from '../storage/connect.js';
import type { App } from '../storage/repos/apps.js';
import type { Database } from '../storage/schema.js';
import { isoTime } from '../shared/time.js';
import { type AppUserListRow, findAppUserListRow, listAppUsers } from '../storage/repos/app-user-listing.js';
import { setAppUserStatus } from '../storage/repos/app-users.js';
import { appendEvent } from '../storage/repos/events.js';
import { revokeGrantsOfUser } from '../storage/repos/grants.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { EXAMPLE } from '../shared/examples.js';
import { json } from '../shared/responses.js';

/**
 * Developer user listing and blocking (docs/reference/rest-api.md#user-listing, docs/reference/rest-api.md#developers), inside the authenticated `/v1/dev` scope:
 * `GET /apps/{id}/users?q&status&page&pageSize` and `PATCH /apps/{id}/users/{userId}`.
 */

const positiveInt = (max: number) =>
  z
    .string()
    .regex(/^[0-9]{1,9}$/, 'must be a positive integer')
    .transform(Number)
    .pipe(z.number().int().min(1).max(max));

export const UserListQuery = z.strictObject({
  q: z
    .string()
    .min(1)
    .max(100)
    // eslint-disable-next-line no-control-regex
    .regex(/^[^\u0000-\u001f\u007f]*$/, 'must not contain control characters')
    .optional(),
  status: z.enum(['active', 'blocked', 'disabled']).optional(),
  page: positiveInt(10_000_000).optional(),
  pageSize: positiveInt(100).optional(),
});

const AppParams = z.strictObject({ id: z.string().min(1).max(200) });
const AppUserParams = z.strictObject({ id: z.string().min(1).max(200), userId: z.string().min(1).max(200) });
const StatusBody = z.strictObject({ status: z.enum(['active', 'blocked']) });

const AppUser = z
  .object({
    id: z.string(),
    email: z.string(),
    name: z.string().nullable(),
    status: z.enum(['active', 'blocked', 'disabled']).describe('`blocked` for this app by its developer; `disabled` platform-wide by the admin.'),
    email_verified: z.boolean(),
    idp_bound: z.boolean(),
    created_at: z.string(),
    last_login_at: z.string().nullable(),
    deletion_scheduled_at: z
      .string()
      .nullable()
      .describe('When the account is purged, if the person asked to delete it (docs/account/deletion.md); null otherwise. Read-only here: only the person (by signing in) or the operator may cancel it.'),
  })
  .meta({ id: 'AppUser', description: 'A user who signed in to the app (docs/reference/rest-api.md#developers).' });

const AppUserPage = z.object({ items: z.array(AppUser), page: z.number().int(), pageSize: z.number().int(), total: z.number().int() });

const exampleUser = {
  id: EXAMPLE.userId,
  email: EXAMPLE.email,
  name: 'Ada Lovelace',
  status: 'active',
  email_verified: true,
  idp_bound: false,
  created_at: EXAMPLE.time,
  last_login_at: EXAMPLE.time,
  deletion_scheduled_at: null,
};

/** A listing item: exactly the documented fields (no hashes, tokens or other user data). */
export const toListItem = (r: AppUserListRow) => ({
  id: r.id,
  email: r.email,
  name: r.name,
  status: r.status,
  email_verified: r.emailVerified,
  idp_bound: r.idpBound,
  created_at: isoTime(r.createdAt),
  last_login_at: r.lastLoginAt === null ? null : isoTime(r.lastLoginAt),
  deletion_scheduled_at: r.deletionScheduledAt === null ? null : isoTime(r.deletionScheduledAt),
});

/** One user of the app as the listing shows them; undefined when not a user of it. */
export async function findAppUserItem(db: Kysely<Database>, appId: string, userId: string) {
  const row = await findAppUserListRow(db, appId, userId);
  return row && toListItem(row);
}

/** One page of an app's users, as the listing shows them (the query as UserListQuery parsed it). */
export async function listAppUserPage(db: Kysely<Database>, dialect: Dialect, appId: string, query: z.output<typeof UserListQuery>) {
  const page = query.page ?? 1;
  const pageSize = query.pageSize ?? 20;
  const { items, total } = await listAppUsers(db, dialect, { appId, q: query.q, status: query.status, page, pageSize });
  return { items: items.map(toListItem), page, pageSize, total };
}

/**
 * Blocks or unblocks a user of `owned` (404 when not a user of it). Blocking takes effect at once: the
 * app's refresh tokens, sessions and access tokens (sid) die. A change is recorded as an event.
 */
export async function setAppUserStatusAudited(db: Kysely<Database>, now: number, owned: App, userId: string, status: 'active' | 'blocked', ctx: RequestContext) {
  const row = await db.transaction().execute(async (trx) => {
    const before = await findAppUserListRow(trx, owned.id, userId);
    if (!before) throw new AppError('not_found', { detail: `user ${userId} is not a user of ${owned.id}` });
    await setAppUserStatus(trx, owned.id, userId, status);
    if (status === 'blocked') await revokeGrantsOfUser(trx, userId, now, 'blocked', owned.id);
    const appStatusBefore = before.status === 'disabled' ? undefined : before.status;
    if (appStatusBefore !== status) {
      await appendEvent(trx, now, {
        type: status === 'blocked' ? 'app.user_blocked' : 'app.user_unblocked',
        appId: owned.id,
        userId,
        ip: ctx.ip,
        userAgent: ctx.userAgent,
        data: { developer_id: owned.developerId },
      });
    }
    return findAppUserListRow(trx, owned.id, userId);
  });
  return toListItem(row!);
}

export default async function devAppUsersRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/apps/:id/users',
    {
      schema: {
        operationId: 'listAppUsers',
        summary: 'List the users of an app',
        description: 'Newest first. `q` matches a case-insensitive substring of email or name.',
        params: AppParams,
        querystring: UserListQuery,
        response: { 200: json('One page of users.', AppUserPage) },
        errors: { 404: ['not_found'] },
        examples: {
          search: {
            summary: 'Search by email',
            params: { id: EXAMPLE.appId },
            query: { q: 'ada', page: '1', pageSize: '20' },
            status: 200,
            response: { items: [exampleUser], page: 1, pageSize: 20, total: 1 },
          },
        },
      },
    },
    async (request) => {
      const owned = await app.requireOwnedApp(request, request.params.id);
      return listAppUserPage(app.db, app.dialect, owned.id, request.query);
    },
  );

  app.patch(
    '/apps/:id/users/:userId',
    {
      schema: {
        operationId: 'setAppUserStatus',
        summary: 'Block or unblock a user for an app',
        description: "Blocking revokes the user's refresh tokens and sessions for the app at once.",
        params: AppUserParams,
        body: StatusBody,
        response: { 200: json('The user.', AppUser) },
        errors: { 404: ['not_found'] },
        examples: {
          unblock: { summary: 'Unblock', params: { id: EXAMPLE.appId, userId: EXAMPLE.userId }, body: { status: 'active' }, status: 200, response: exampleUser },
        },
      },
    },
    async (request) => {
      const owned = await app.requireOwnedApp(request, request.params.id);
      return setAppUserStatusAudited(app.db, app.clock.now(), owned, request.params.userId, request.body.status, requestContext(request));
    },
  );
}
