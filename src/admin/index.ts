import type { FastifyInstance, FastifyPluginAsync, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { bearerCredential } from '../shared/bearer.js';
import { safeEqual } from '../shared/ids.js';
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

/**
 * Wrong tokens per IP per minute: once an IP has sent this many, every admin request from it answers
 * 429 `rate_limited` until the minute is over, the right token included (a limit that let the right
 * token through would tell a guesser when it had won).
 */
export const MAX_FAILED_ADMIN_TOKENS_PER_MINUTE = 20;

export async function authenticateAdmin(request: FastifyRequest): Promise<void> {
  const expected = request.server.config.adminToken;
  const throttleKey = `admin-token-failure:${request.ip}`;
  await request.server.throttle.assertUnderLimit(throttleKey, MAX_FAILED_ADMIN_TOKENS_PER_MINUTE, 60);
  const header = request.headers.authorization;
  if (!header) throw new AppError('unauthorized', { headers: { 'www-authenticate': 'Bearer realm="gatehouse-admin"' }, detail: 'no admin token' });
  const token = bearerCredential(header);
  if (!expected || !token || !safeEqual(token, expected)) {
    await request.server.throttle.hitKey(throttleKey, MAX_FAILED_ADMIN_TOKENS_PER_MINUTE, 60);
    throw new AppError('unauthorized', { detail: expected ? 'wrong admin token' : 'ADMIN_TOKEN is not set' });
  }
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
