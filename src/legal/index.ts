import type { FastifyInstance } from 'fastify';
import { AppError } from '../errors.js';
import { findApp } from '../storage/repos/apps.js';
import { AppDocParams, AppParams, DocTypeParams, LangQuery, ViewBody } from './schemas.js';
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

/**
 * Public legal documents (`/v1/legal`, CONTRACT §8): no authentication, no cookies. Every answer allows
 * any origin without credentials (CONTRACT §14.17), so apps can show the documents from their own pages.
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

  app.get(
    '/platform/:docType',
    { schema: { params: DocTypeParams, querystring: LangQuery } },
    async (request, reply) => {
      const resolved = await resolveDocument(app.db, PLATFORM_OWNER, request.params.docType, request.query.lang);
      reply.headers(cacheable);
      return toDocumentView(authUrl, resolved);
    },
  );

  app.get(
    '/apps/:appId',
    { schema: { params: AppParams, querystring: LangQuery } },
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
    { schema: { params: AppDocParams, querystring: LangQuery } },
    async (request, reply) => {
      const target = await publicApp(request.params.appId);
      const resolved = await resolveDocument(app.db, target.id, request.params.docType, request.query.lang);
      reply.headers(cacheable);
      return toDocumentView(authUrl, resolved);
    },
  );

  app.post(
    '/apps/:appId/view',
    { schema: { params: AppParams, body: ViewBody } },
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
