import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { AppDocParams, countView, DocTypeParams, hostedLegalUrl, LangQuery, PLATFORM_OWNER, resolveDocument, type ResolvedDocument, VIEW_LIMIT_PER_MINUTE } from '../legal/index.js';
import { isoTime } from '../shared/time.js';
import { findApp } from '../storage/repos/apps.js';
import { renderPage } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * Hosted legal pages (docs/guides/hosted-pages.md#pages-sessions-and-headers): `/legal/platform/{docType}` and `/legal/apps/{appId}/{docType}`,
 * `?lang=` as in the API. The body is the sanitized HTML rendered at publish time. Opening a page
 * counts as a view (docs/reference/rest-api.md#legal-documents), within the per-IP view limit (over it the page still renders).
 */
export default async function legalPages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const authUrl = app.config.authUrl;

  async function show(request: FastifyRequest, reply: FastifyReply, owner: string, appName: string | null, resolved: ResolvedDocument) {
    const v = resolved.version;
    let counted = true;
    try {
      await app.throttle.hitKey(`legal-view:${request.ip}`, VIEW_LIMIT_PER_MINUTE, 60);
    } catch {
      counted = false;
    }
    if (counted) await countView(app.db, v, app.clock.now());
    return renderPage(request, reply, 'legal', {
      // The translator returns an unknown key as-is: the document's own title becomes the page title.
      titleKey: v.title,
      docTitle: v.title,
      docLang: v.lang,
      appName,
      version: v.version,
      updatedAt: isoTime(v.createdAt).slice(0, 10),
      contentHtml: v.contentHtml,
      languages: resolved.langs.map((lang) => ({ lang, url: hostedLegalUrl(authUrl, owner, v.docType, lang), current: lang === v.lang })),
    });
  }

  app.get(
    '/legal/platform/:docType',
    { schema: { params: DocTypeParams, querystring: LangQuery } },
    async (request, reply) => show(request, reply, PLATFORM_OWNER, null, await resolveDocument(app.db, PLATFORM_OWNER, request.params.docType, request.query.lang)),
  );

  app.get(
    '/legal/apps/:appId/:docType',
    { schema: { params: AppDocParams, querystring: LangQuery } },
    async (request, reply) => {
      const target = await findApp(app.db, request.params.appId);
      if (!target || target.disabled) throw new AppError('not_found', { detail: `app ${request.params.appId}` });
      return show(request, reply, target.id, target.name, await resolveDocument(app.db, target.id, request.params.docType, request.query.lang));
    },
  );
}
