import type { FastifyInstance, FastifyPluginAsync } from 'fastify';
import { authenticateDeveloper, requireOwnedApp } from './auth.js';
import { EXAMPLE } from '../shared/examples.js';
import { requestContext } from '../shared/request-context.js';
import { json, noBody, shareRouteDocs } from '../shared/responses.js';
import { AppList, AppParams, AppView, CreateAppBody, NoQuery, UpdateAppBody } from './schemas.js';
import { checkBackchannelUri, checkResourceUris, createApp, listApps, removeApp, rotateClientSecret, toAppView, updateApp } from './service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { findAppUserItem, listAppUserPage, setAppUserStatusAudited, UserListQuery } from './app-users.js';
export { requireOwnedApp } from './auth.js';
export { EventsQuery, listAppEventPage, listUserEventsOfApp } from './events.js';
export { listAppLegalViews } from './legal.js';
export { CreateAppBody, MAIL_KINDS, UpdateAppBody } from './schemas.js';
export { validateRedirectUris } from './redirect-uris.js';
export { type AppView, backchannelUriProblem, resourceUrisProblem, checkBackchannelUri, createApp, listApps, removeApp, rotateClientSecret, toAppView, updateApp } from './service.js';

/**
 * The developer API (`/v1/dev`, docs/reference/rest-api.md#developers). Every route in this scope is authenticated by a developer
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
  const example = {
    id: EXAMPLE.appId,
    client_id: EXAMPLE.appId,
    name: 'Example app',
    type: 'public',
    redirect_uris: [EXAMPLE.redirectUri],
    allowed_origins: [],
    features: { auth: true, profile: true },
    required_fields: [],
    mfa: 'optional',
    logo_url: null,
    logo_url_dark: null,
    accent_color: null,
    backchannel_logout_uri: null,
    backchannel_logout_session_required: false,
    disabled: false,
    created_at: EXAMPLE.time,
    updated_at: EXAMPLE.time,
  };
  const owned = { params: { id: EXAMPLE.appId } };

  app.post(
    '/apps',
    {
      schema: {
        operationId: 'createApp',
        summary: 'Create an app',
        description: 'A developer may have at most 100 apps (400 `invalid_request` beyond); an app at most 20 redirect URIs and 20 `allowed_origins`.',
        body: CreateAppBody,
        response: { 201: json("The app; a confidential app's client_secret is shown only here.", AppView) },
        examples: {
          create: {
            summary: 'A public app (PKCE)',
            body: { name: 'Example app', redirect_uris: [EXAMPLE.redirectUri], type: 'public', features: { auth: true, profile: true } },
            status: 201,
            response: example,
          },
          badRedirect: {
            summary: 'A redirect URI that is not allowed',
            body: { name: 'Example app', redirect_uris: ['http://app.example/callback'], type: 'public' },
            status: 400,
            response: { code: 'invalid_request', message: 'The request is missing a required field or has a malformed one.', details: [{ path: 'body.redirect_uris.0', message: 'must use https (http only for loopback hosts)' }] },
          },
        },
      },
    },
    async (request, reply) => {
      checkBackchannelUri(request.body.backchannel_logout_uri, { publicOnly: app.config.webhooks.publicOnly });
      checkResourceUris(request.body.resource_uris, app.config.production);
      reply.code(201);
      return createApp(app.db, now(), request.developer.id, request.body, requestContext(request));
    },
  );

  app.get(
    '/apps',
    {
      schema: {
        operationId: 'listApps',
        summary: "List the developer's apps",
        querystring: NoQuery,
        response: { 200: json('The apps.', AppList) },
        examples: { list: { summary: 'All apps', status: 200, response: { items: [example] } } },
      },
    },
    async (request) => ({ items: await listApps(app.db, request.developer.id) }));

  app.get(
    '/apps/:id',
    {
      schema: {
        operationId: 'getApp',
        summary: 'Read an app',
        params: AppParams,
        response: { 200: json('The app.', AppView) },
        errors: { 404: ['not_found'] },
        examples: { read: { summary: 'An app', ...owned, status: 200, response: example } },
      },
    },
    async (request) => {
      return toAppView(await app.requireOwnedApp(request, request.params.id));
    },
  );

  app.patch(
    '/apps/:id',
    {
      schema: {
        operationId: 'updateApp',
        summary: 'Change an app',
        description: 'Only the fields sent change; `type` is fixed at creation.',
        params: AppParams,
        body: UpdateAppBody,
        response: { 200: json('The updated app.', AppView) },
        errors: { 404: ['not_found'] },
        examples: { rename: { summary: 'Rename', ...owned, body: { name: 'Example app' }, status: 200, response: example } },
      },
    },
    async (request) => {
      const owned = await app.requireOwnedApp(request, request.params.id);
      checkBackchannelUri(request.body.backchannel_logout_uri, { publicOnly: app.config.webhooks.publicOnly });
      checkResourceUris(request.body.resource_uris, app.config.production);
      return updateApp(app.db, now(), owned, request.body, requestContext(request));
    },
  );

  app.delete(
    '/apps/:id',
    {
      schema: {
        operationId: 'deleteApp',
        summary: 'Delete an app',
        description: 'Its grants, codes, consents, app users and profiles go with it.',
        params: AppParams,
        response: { 204: noBody('Deleted.') },
        errors: { 404: ['not_found'] },
        examples: { remove: { summary: 'Delete', ...owned, status: 204 } },
      },
    },
    async (request, reply) => {
      await removeApp(app.db, now(), await app.requireOwnedApp(request, request.params.id), requestContext(request));
      return reply.code(204).send();
    },
  );

  app.post(
    '/apps/:id/secret',
    {
      schema: {
        operationId: 'rotateAppSecret',
        summary: "Replace a confidential app's client secret",
        description: 'The old secret stops working at once.',
        params: AppParams,
        response: { 200: json('The app with its new client_secret (shown only here).', AppView) },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
        examples: {
          rotate: {
            summary: 'A new secret',
            params: { id: EXAMPLE.confidentialAppId },
            status: 200,
            response: { ...example, id: EXAMPLE.confidentialAppId, client_id: EXAMPLE.confidentialAppId, type: 'confidential', client_secret: 'cs_7hV2kQ9mX4pL1nB8zR6tW3yC5fJ0dG2s' },
          },
        },
      },
    },
    async (request) =>
    rotateClientSecret(app.db, now(), await app.requireOwnedApp(request, request.params.id), requestContext(request)),
  );
}

export default async function devApi(app: FastifyInstance, options: DevApiOptions) {
  app.decorateRequest('developer', null as never);
  app.decorate('requireOwnedApp', requireOwnedApp);
  app.addHook('onRequest', authenticateDeveloper);
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, { tags: ['developer'], security: [{ developerKey: [] }], errors: { 401: ['unauthorized'], 429: ['rate_limited'] } }),
  );
  await app.register(appsRoutes);
  for (const routes of options.routes ?? []) await app.register(routes);
}
