import type { FastifyInstance } from 'fastify';
import { DocTypeParams, LegalVersion, MarkdownRenderer, PLATFORM_OWNER, PublishBody, PublishQuery, publishVersion, toVersionView } from '../legal/index.js';
import { EXAMPLE } from '../shared/examples.js';
import { json } from '../shared/responses.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/** `PUT /v1/admin/legal/{docType}?lang=` (docs/reference/rest-api.md#admin): publishes a platform document version (201). */
export default async function adminLegalRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // Same bounded rendering as developer documents (legal/renderer.ts); stopped with the app.
  const renderer = new MarkdownRenderer();
  app.addHook('onClose', async () => renderer.close());
  app.put(
    '/legal/:docType',
    {
      schema: {
        operationId: 'publishPlatformLegalDocument',
        summary: 'Publish a new version of a platform legal document',
        description: 'Registration asks users to accept the platform `terms` and `privacy`.',
        params: DocTypeParams,
        querystring: PublishQuery,
        body: PublishBody,
        response: { 201: json('The published version.', LegalVersion) },
        errors: { 503: ['service_unavailable'] },
        examples: {
          terms: {
            summary: 'Terms of service in English',
            params: { docType: 'terms' },
            query: { lang: 'en' },
            body: { title: 'Terms of service', content: '# Terms\n\nBe kind.' },
            status: 201,
            response: {
              docType: 'terms',
              lang: 'en',
              version: 2,
              title: 'Terms of service',
              content: '# Terms\n\nBe kind.',
              content_html: '<h1>Terms</h1>\n<p>Be kind.</p>\n',
              updated_at: EXAMPLE.time,
              url: 'http://localhost:3000/legal/platform/terms?lang=en',
            },
          },
        },
      },
    },
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
