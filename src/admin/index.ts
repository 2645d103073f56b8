import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { authenticateAdmin } from '../plugins/admin-token.js';
import { EXAMPLE } from '../shared/examples.js';
import { AppError } from '../errors.js';
import { requestContext } from '../shared/request-context.js';
import { json, noBody, shareRouteDocs } from '../shared/responses.js';
import { findUserById } from '../storage/repos/users.js';
import {
  AdminUser,
  AdminUserPage,
  CreateDeveloperBody,
  CreatedDeveloper,
  DeveloperList,
  NoQuery,
  RotatedKeys,
  UpdateUserBody,
  UserListQuery,
  UserParams,
} from './schemas.js';
import { adminUserView, createDeveloper, listDeveloperViews, listUsers, setUserStatus } from './service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { CreateDeveloperBody, UserListQuery as PlatformUserListQuery } from './schemas.js';
export { createDeveloper, listDeveloperViews, listUsers, setUserStatus } from './service.js';

/**
 * The admin API (`/v1/admin`, docs/reference/rest-api.md#admin): `Authorization: Bearer $ADMIN_TOKEN`, compared in constant
 * time. Without ADMIN_TOKEN every admin route answers 401 `unauthorized` (nothing can match).
 * More admin routes (provider settings, platform legal documents) join this scope through `routes`.
 */
export interface AdminApiOptions {
  /** Route plugins registered inside the authenticated scope. */
  routes?: FastifyPluginAsync[];
}

async function adminRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const now = () => app.clock.now();
  const developer = { id: EXAMPLE.developerId, email: 'dev@example.com', name: 'Example developer', created_at: EXAMPLE.time };
  const user = { id: EXAMPLE.userId, email: EXAMPLE.email, email_verified: true, name: 'Ada Lovelace', phone_number: null, birthdate: null, created_at: EXAMPLE.time, status: 'active', idp_bound: false, deletion_scheduled_at: null };

  app.post(
    '/developers',
    {
      schema: {
        operationId: 'createDeveloper',
        summary: 'Create a developer and its API key',
        body: CreateDeveloperBody,
        response: { 201: json('The developer, with its API key shown once.', CreatedDeveloper) },
        errors: { 409: ['conflict'] },
        examples: {
          create: {
            summary: 'A developer',
            body: { email: 'lin@example.com', name: 'Lin' },
            status: 201,
            response: { id: 'dev_01k2v6xe5g7j9l1n3q5s7u9w1y', email: 'lin@example.com', name: 'Lin', created_at: EXAMPLE.time, api_key: 'dk_3mQ8vX1pL6nB9zR4tW7yC2fJ5dG8sH0k' },
          },
        },
      },
    },
    async (request, reply) => {
      reply.code(201);
      return createDeveloper(app.db, now(), request.body);
    },
  );

  app.get(
    '/developers',
    {
      schema: {
        operationId: 'listDevelopers',
        summary: 'List developers',
        querystring: NoQuery,
        response: { 200: json('Every developer.', DeveloperList) },
        examples: { list: { summary: 'All developers', status: 200, response: { items: [developer] } } },
      },
    },
    async () => ({ items: await listDeveloperViews(app.db) }));

  app.get(
    '/users',
    {
      schema: {
        operationId: 'listUsers',
        summary: 'List end users',
        querystring: UserListQuery,
        response: { 200: json('One page of users, newest first.', AdminUserPage) },
        examples: {
          search: { summary: 'Search by email', query: { q: 'ada', pageSize: '20' }, status: 200, response: { items: [user], page: 1, pageSize: 20, total: 1 } },
        },
      },
    },
    async (request) => listUsers(app.db, request.query));

  app.patch(
    '/users/:id',
    {
      schema: {
        operationId: 'setUserStatus',
        summary: 'Enable or disable an end user',
        description: 'Disabling revokes every refresh token, session and grant of the user at once.',
        params: UserParams,
        body: UpdateUserBody,
        response: { 200: json('The user.', AdminUser) },
        errors: { 404: ['not_found'] },
        examples: { enable: { summary: 'Enable', params: { id: EXAMPLE.userId }, body: { status: 'active' }, status: 200, response: user } },
      },
    },
    async (request) =>
    setUserStatus(app.db, now(), request.params.id, request.body.status),
  );

  app.delete(
    '/users/:id/deletion',
    {
      schema: {
        operationId: 'cancelUserDeletion',
        summary: "Cancel an end user's scheduled account deletion",
        description:
          'For a person who asked to delete their account and then asked the operator to keep it (docs/account/deletion.md): the account stays, ' +
          'its sessions and tokens stay revoked (the person signs in again). Records `user.deletion_cancelled` (`via: admin`). ' +
          '404 `not_found` when there is no such user or no deletion is scheduled (an account already purged is gone).',
        params: UserParams,
        response: { 200: json('The user, deletion_scheduled_at null.', AdminUser) },
        errors: { 404: ['not_found'] },
        examples: {
          nothingScheduled: {
            summary: 'No deletion is scheduled',
            params: { id: EXAMPLE.userId },
            status: 404,
            response: { code: 'not_found', message: 'No deletion is scheduled for this user.' },
          },
        },
      },
    },
    async (request) => {
      if (!(await app.accountDeletion.cancel(request.params.id, 'admin', requestContext(request)))) {
        throw new AppError('not_found', { message: 'No deletion is scheduled for this user.', detail: 'no scheduled deletion' });
      }
      return adminUserView(app.db, request.params.id);
    },
  );

  app.delete(
    '/users/:id/mfa',
    {
      schema: {
        operationId: 'resetUserFactors',
        summary: "Reset an end user's second factors",
        description:
          'For a user who lost their phone, recovery codes and passkeys: removes the authenticator app, the recovery codes and the passkeys, and lifts the lock on wrong codes. Records `mfa.reset`.',
        params: UserParams,
        response: { 204: noBody('The factors are gone; the password alone signs in again.') },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      if (!(await findUserById(app.db, request.params.id))) throw new AppError('not_found', { detail: 'no such user' });
      await app.mfa.resetFactors(request.params.id, requestContext(request));
      return reply.code(204).send();
    },
  );

  app.post(
    '/keys/rotate',
    {
      schema: {
        operationId: 'rotateSigningKeys',
        summary: 'Add new signing keys',
        description: 'New ES256 and RS256 keys sign from now on; retired public keys stay in the JWKS until every token they signed has expired.',
        response: { 200: json('The new keys.', RotatedKeys) },
        examples: { rotate: { summary: 'Rotate', status: 200, response: { kids: ['es256-01k2v6xf', 'rs256-01k2v6xg'] } } },
      },
    },
    async () => ({ kids: await app.keys.rotate() }));
}

export default async function adminApi(app: FastifyInstance, options: AdminApiOptions) {
  app.addHook('onRequest', authenticateAdmin);
  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['admin'], security: [{ adminToken: [] }], errors: { 401: ['unauthorized'], 429: ['rate_limited'] } }));
  await app.register(adminRoutes);
  for (const routes of options.routes ?? []) await app.register(routes);
}
