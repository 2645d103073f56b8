import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { authenticateAdmin } from '../plugins/admin-token.js';
import {
  CreateDeveloperBody,
  UpdateUserBody,
  UserListQuery,
  UserParams,
} from './schemas.js';
import { createDeveloper, listDeveloperViews, listUsers, setUserStatus } from './service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * The admin API (`/v1/admin`, CONTRACT §10): `Authorization: Bearer $ADMIN_TOKEN`, compared in constant
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

  app.post('/developers', { schema: { body: CreateDeveloperBody } }, async (request, reply) => {
    reply.code(201);
    return createDeveloper(app.db, now(), request.body);
  });

  app.get('/developers', async () => ({ items: await listDeveloperViews(app.db) }));

  app.get('/users', { schema: { querystring: UserListQuery } }, async (request) => listUsers(app.db, request.query));

  app.patch('/users/:id', { schema: { params: UserParams, body: UpdateUserBody } }, async (request) =>
    setUserStatus(app.db, now(), request.params.id, request.body.status),
  );

  app.post('/keys/rotate', async () => ({ kids: await app.keys.rotate() }));
}

export default async function adminApi(app: FastifyInstance, options: AdminApiOptions) {
  app.addHook('onRequest', authenticateAdmin);
  await app.register(adminRoutes);
  for (const routes of options.routes ?? []) await app.register(routes);
}
