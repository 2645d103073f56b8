import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { SecretBox } from '../shared/crypto.js';
import { EXAMPLE } from '../shared/examples.js';
import { requestContext } from '../shared/request-context.js';
import { json, noBody } from '../shared/responses.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { WebhookDeliverer } from './deliverer.js';
import {
  AppOnlyParams,
  CreateWebhookBody,
  DeliveriesQuery,
  DeliveryParams,
  RotateSecretBody,
  UpdateWebhookBody,
  WebhookDelivery,
  WebhookDeliveryPage,
  WebhookEndpoint,
  WebhookEndpointList,
  WebhookEndpointWithSecret,
  WebhookParams,
} from './schemas.js';
import { Webhooks } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { CreateWebhookBody, UpdateWebhookBody } from './schemas.js';
export { type WebhookDeliveryView, type WebhookEndpointView, Webhooks } from './service.js';
export { WEBHOOK_TYPES } from '../shared/webhook-events.js';
export { WebhookDeliverer } from './deliverer.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** Webhook endpoints and their log (docs/webhooks.md). */
    webhooks: Webhooks;
    /** The background deliverer of this process. */
    webhookDeliverer: WebhookDeliverer;
  }
}

/** The webhooks service and its background deliverer, started when the app is ready and stopped when it closes. */
async function webhooksPlugin(app: FastifyInstance) {
  const secrets = new SecretBox(app.config.secretKey, 'webhook-secret');
  const policy = { publicOnly: app.config.webhooks.publicOnly };
  const deliverer = new WebhookDeliverer({ db: app.db, clock: app.clock, log: app.log, secrets, policy });
  app.decorate('webhookDeliverer', deliverer);
  app.decorate('webhooks', new Webhooks({ db: app.db, clock: app.clock, secrets, policy, nudge: () => deliverer.nudge() }));
  app.addHook('onReady', async () => deliverer.start());
  app.addHook('onClose', async () => deliverer.stop());
}

export const webhooksServicePlugin = fp(webhooksPlugin, { name: 'webhooks', dependencies: ['db'] });

/**
 * `/v1/dev/apps/{id}/webhooks…` (docs/webhooks.md): registered inside the developer API scope, so each
 * route is authenticated by a developer key and resolves `{id}` with `requireOwnedApp` like every other
 * `/v1/dev/apps/{id}/…` route (another developer's app answers 404).
 */
export default async function webhookDevRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const owned = async (request: Parameters<FastifyInstance['requireOwnedApp']>[0], id: string) => (await app.requireOwnedApp(request, id)).id;

  app.get(
    '/apps/:id/webhooks',
    {
      schema: {
        operationId: 'listWebhooks',
        summary: "List an app's webhook endpoints",
        params: AppOnlyParams,
        response: { 200: json('The endpoints (without their secrets).', WebhookEndpointList) },
        errors: { 404: ['not_found'] },
        examples: { list: { summary: 'All endpoints', params: { id: EXAMPLE.appId }, status: 200, response: { items: [] } } },
      },
    },
    async (request) => ({ items: await app.webhooks.list(await owned(request, request.params.id)) }),
  );

  app.post(
    '/apps/:id/webhooks',
    {
      schema: {
        operationId: 'createWebhook',
        summary: 'Add a webhook endpoint',
        description: 'At most 10 per app. In production the URL must be https and resolve to a public address. The signing secret is in this answer only.',
        params: AppOnlyParams,
        body: CreateWebhookBody,
        response: { 201: json('The endpoint with its signing secret (shown only here).', WebhookEndpointWithSecret) },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      const appId = await owned(request, request.params.id);
      reply.code(201);
      return app.webhooks.create(appId, request.body, requestContext(request));
    },
  );

  app.get(
    '/apps/:id/webhooks/:webhookId',
    {
      schema: {
        operationId: 'getWebhook',
        summary: 'Read a webhook endpoint',
        params: WebhookParams,
        response: { 200: json('The endpoint.', WebhookEndpoint) },
        errors: { 404: ['not_found'] },
      },
    },
    async (request) => app.webhooks.get(await owned(request, request.params.id), request.params.webhookId),
  );

  app.patch(
    '/apps/:id/webhooks/:webhookId',
    {
      schema: {
        operationId: 'updateWebhook',
        summary: 'Change a webhook endpoint',
        description: 'Only the fields sent change. Enabling an endpoint the server disabled clears the reason.',
        params: WebhookParams,
        body: UpdateWebhookBody,
        response: { 200: json('The updated endpoint.', WebhookEndpoint) },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
      },
    },
    async (request) => app.webhooks.update(await owned(request, request.params.id), request.params.webhookId, request.body, requestContext(request)),
  );

  app.delete(
    '/apps/:id/webhooks/:webhookId',
    {
      schema: {
        operationId: 'deleteWebhook',
        summary: 'Delete a webhook endpoint',
        description: 'Its delivery log goes with it; pending deliveries are never sent.',
        params: WebhookParams,
        response: { 204: noBody('Deleted.') },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      await app.webhooks.remove(await owned(request, request.params.id), request.params.webhookId, requestContext(request));
      return reply.code(204).send();
    },
  );

  app.post(
    '/apps/:id/webhooks/:webhookId/secret',
    {
      schema: {
        operationId: 'rotateWebhookSecret',
        summary: "Replace a webhook endpoint's signing secret",
        description: 'The previous secret keeps signing beside the new one for `overlap_seconds` (default 24 h): deliveries carry both signatures meanwhile.',
        params: WebhookParams,
        body: RotateSecretBody,
        response: { 200: json('The endpoint with its new signing secret (shown only here).', WebhookEndpointWithSecret) },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
      },
    },
    async (request) => app.webhooks.rotateSecret(await owned(request, request.params.id), request.params.webhookId, request.body, requestContext(request)),
  );

  app.get(
    '/apps/:id/webhooks/:webhookId/deliveries',
    {
      schema: {
        operationId: 'listWebhookDeliveries',
        summary: "A webhook endpoint's delivery log",
        description: 'Newest first, from the cursor back.',
        params: WebhookParams,
        querystring: DeliveriesQuery,
        response: { 200: json('One page of deliveries.', WebhookDeliveryPage) },
        errors: { 400: ['invalid_request'], 404: ['not_found'] },
      },
    },
    async (request) => app.webhooks.deliveries(await owned(request, request.params.id), request.params.webhookId, request.query),
  );

  app.post(
    '/apps/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    {
      schema: {
        operationId: 'redeliverWebhook',
        summary: 'Send a delivery again',
        description: 'Queues it now, with the same `webhook-id` (a receiver that already handled it can tell). The endpoint must be enabled.',
        params: DeliveryParams,
        response: { 202: json('The delivery, queued.', WebhookDelivery) },
        errors: { 404: ['not_found'], 409: ['conflict'] },
      },
    },
    async (request, reply) => {
      reply.code(202);
      return app.webhooks.redeliver(await owned(request, request.params.id), request.params.webhookId, request.params.deliveryId);
    },
  );

  app.post(
    '/apps/:id/webhooks/:webhookId/test',
    {
      schema: {
        operationId: 'sendTestWebhook',
        summary: 'Send a test event to a webhook endpoint',
        description: 'A `webhook.test` message, signed and logged like any other. The endpoint must be enabled.',
        params: WebhookParams,
        response: { 202: json('The test delivery, queued.', WebhookDelivery) },
        errors: { 404: ['not_found'], 409: ['conflict'] },
      },
    },
    async (request, reply) => {
      reply.code(202);
      return app.webhooks.sendTest(await owned(request, request.params.id), request.params.webhookId);
    },
  );
}
