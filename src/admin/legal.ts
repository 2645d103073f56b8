import type { FastifyInstance } from 'fastify';
import { DocTypeParams, PublishBody, PublishQuery } from '../legal/schemas.js';
import { MarkdownRenderer } from '../legal/renderer.js';
import { PLATFORM_OWNER, publishVersion, toVersionView } from '../legal/service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/** `PUT /v1/admin/legal/{docType}?lang=` (CONTRACT §10): publishes a platform document version (201). */
export default async function adminLegalRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // Same bounded rendering as developer documents (legal/renderer.ts); stopped with the app.
  const renderer = new MarkdownRenderer();
  app.addHook('onClose', async () => renderer.close());
  app.put(
    '/legal/:docType',
    { schema: { params: DocTypeParams, querystring: PublishQuery, body: PublishBody } },
    async (request, reply) => {
      const version = await publishVersion(app.db, renderer, {
        owner: PLATFORM_OWNER,
        docType: request.params.docType,
        lang: request.query.lang ?? 'en',
        body: request.body,
        at: app.clock.now(),
      });
      return reply.code(201).send(toVersionView(app.config.authUrl, version));
    },
  );
}
