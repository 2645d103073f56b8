import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { authenticateDeveloper, requireOwnedApp } from './auth.js';
import { AppParams, CreateAppBody, UpdateAppBody } from './schemas.js';
import { createApp, listApps, removeApp, rotateClientSecret, toAppView, updateApp } from './service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * The developer API (`/v1/dev`, CONTRACT §9). Every route in this scope is authenticated by a developer
 * API key (`request.developer`) and can resolve its `{id}` with `app.requireOwnedApp(request, id)`.
 * More developer routes (app users, events, legal) join this scope through the `routes` option.
 */
export interface DevApiOptions {
  /** Route plugins registered inside the authenticated scope, after the apps routes. */
  routes?: FastifyPluginAsync[];
}

async function appsRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const now = () => app.clock.now();

  app.post('/apps', { schema: { body: CreateAppBody } }, async (request, reply) => {
    reply.code(201);
    return createApp(app.db, now(), request.developer.id, request.body);
  });

  app.get('/apps', async (request) => ({ items: await listApps(app.db, request.developer.id) }));

  app.get('/apps/:id', { schema: { params: AppParams } }, async (request) => {
    return toAppView(await app.requireOwnedApp(request, request.params.id));
  });

  app.patch('/apps/:id', { schema: { params: AppParams, body: UpdateAppBody } }, async (request) =>
    updateApp(app.db, now(), await app.requireOwnedApp(request, request.params.id), request.body),
  );

  app.delete('/apps/:id', { schema: { params: AppParams } }, async (request, reply) => {
    await removeApp(app.db, await app.requireOwnedApp(request, request.params.id));
    return reply.code(204).send();
  });

  app.post('/apps/:id/secret', { schema: { params: AppParams } }, async (request) =>
    rotateClientSecret(app.db, now(), await app.requireOwnedApp(request, request.params.id)),
  );
}

export default async function devApi(app: FastifyInstance, options: DevApiOptions) {
  app.decorateRequest('developer', null as never);
  app.decorate('requireOwnedApp', requireOwnedApp);
  app.addHook('onRequest', authenticateDeveloper);
  await app.register(appsRoutes);
  for (const routes of options.routes ?? []) await app.register(routes);
}
