import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { findApp } from '../storage/repos/apps.js';
import { EXAMPLE } from '../shared/examples.js';
import { json, shareRouteDocs } from '../shared/responses.js';
import { AppDocParams, AppParams, DocTypeParams, LangQuery, LegalCenter, LegalDocument, ViewBody, ViewRecorded } from './schemas.js';
import {
  countView,
  listDocumentSummaries,
  PLATFORM_OWNER,
  resolveDocument,
  resolveViewedVersion,
  toDocumentView,
  VIEW_LIMIT_PER_MINUTE,
} from './service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { MarkdownRenderer } from './renderer.js';
export { AppDocParams, DocTypeParams, LangQuery, LegalVersion, PublishBody, PublishQuery } from './schemas.js';
export {
  countView,
  dayOf,
  hostedLegalUrl,
  listDocumentSummaries,
  PLATFORM_OWNER,
  publishVersion,
  resolveDocument,
  type ResolvedDocument,
  toVersionView,
  VIEW_LIMIT_PER_MINUTE,
} from './service.js';

/**
 * Public legal documents (`/v1/legal`, docs/reference/rest-api.md#legal-documents): no authentication, no cookies. Every answer allows
 * any origin without credentials (docs/reference/rest-api.md#cors), so apps can show the documents from their own pages.
 */
export default async function legalRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const authUrl = app.config.authUrl;

  app.addHook('onSend', async (_request, reply) => {
    reply.header('access-control-allow-origin', '*');
    reply.removeHeader('set-cookie');
  });

  /** The app whose legal documents are asked for; unknown and disabled apps are 404. */
  const publicApp = async (appId: string) => {
    const found = await findApp(app.db, appId);
    if (!found || found.disabled) throw new AppError('not_found', { detail: `app ${appId}` });
    return found;
  };
  const cacheable = { 'cache-control': 'public, max-age=60' };
  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['legal'], errors: { 404: ['not_found'] } }));
  const terms = {
    docType: 'terms',
    lang: 'en',
    available_langs: ['en'],
    version: 1,
    title: 'Terms of service',
    content: '# Terms\n\nBe kind.',
    content_html: '<h1>Terms</h1>\n<p>Be kind.</p>\n',
    updated_at: EXAMPLE.time,
    url: 'http://localhost:3000/legal/platform/terms?lang=en',
  };

  app.get(
    '/platform/:docType',
    {
      schema: {
        operationId: 'getPlatformLegalDocument',
        summary: 'A platform legal document',
        params: DocTypeParams,
        querystring: LangQuery,
        response: { 200: json('The current version in the resolved language.', LegalDocument) },
        examples: { terms: { summary: 'The platform terms', params: { docType: 'terms' }, query: { lang: 'en' }, status: 200, response: terms } },
      },
    },
    async (request, reply) => {
      const resolved = await resolveDocument(app.db, PLATFORM_OWNER, request.params.docType, request.query.lang);
      reply.headers(cacheable);
      return toDocumentView(authUrl, resolved);
    },
  );

  app.get(
    '/apps/:appId',
    {
      schema: {
        operationId: 'getLegalCenter',
        summary: "An app's legal center",
        params: AppParams,
        querystring: LangQuery,
        response: { 200: json("The app's and the platform's documents.", LegalCenter) },
        examples: {
          center: {
            summary: 'Documents of an app',
            params: { appId: EXAMPLE.appId },
            status: 200,
            response: {
              appId: EXAMPLE.appId,
              app_name: 'Example app',
              documents: [],
              platform: [{ docType: 'terms', title: terms.title, version: 1, langs: ['en'], updated_at: EXAMPLE.time, url: terms.url }],
            },
          },
        },
      },
    },
    async (request, reply) => {
      const target = await publicApp(request.params.appId);
      reply.headers(cacheable);
      return {
        appId: target.id,
        app_name: target.name,
        documents: await listDocumentSummaries(app.db, authUrl, target.id, request.query.lang),
        platform: await listDocumentSummaries(app.db, authUrl, PLATFORM_OWNER, request.query.lang),
      };
    },
  );

  app.get(
    '/apps/:appId/:docType',
    {
      schema: {
        operationId: 'getAppLegalDocument',
        summary: "An app's legal document",
        params: AppDocParams,
        querystring: LangQuery,
        response: { 200: json('The current version in the resolved language.', LegalDocument) },
      },
    },
    async (request, reply) => {
      const target = await publicApp(request.params.appId);
      const resolved = await resolveDocument(app.db, target.id, request.params.docType, request.query.lang);
      reply.headers(cacheable);
      return toDocumentView(authUrl, resolved);
    },
  );

  app.post(
    '/apps/:appId/view',
    {
      schema: {
        operationId: 'recordLegalView',
        summary: 'Count a view of a legal document',
        description: 'Counted per (app, docType, lang, version, day); throttled per IP.',
        params: AppParams,
        body: ViewBody,
        response: { 202: json('Counted.', ViewRecorded) },
        errors: { 429: ['rate_limited'] },
      },
    },
    async (request, reply) => {
      await app.throttle.hitKey(`legal-view:${request.ip}`, VIEW_LIMIT_PER_MINUTE, 60);
      const target = await publicApp(request.params.appId);
      const version = await resolveViewedVersion(app.db, target.id, request.body);
      await countView(app.db, version, app.clock.now());
      return reply.code(202).send({ status: 'recorded', docType: version.docType, lang: version.lang, version: version.version });
    },
  );

  // Preflight for the view POST (a JSON body makes browsers ask first).
  app.options('/apps/:appId/view', async (_request, reply) =>
    reply
      .code(204)
      .headers({ 'access-control-allow-methods': 'GET, POST', 'access-control-allow-headers': 'Content-Type', 'access-control-max-age': '600' })
      .send(),
  );
}
