import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Database } from '../storage/schema.js';
import { AppError } from '../errors.js';
import { dayOf, DocTypeParams, LegalVersion, MarkdownRenderer, PublishBody, PublishQuery, publishVersion, toVersionView } from '../legal/index.js';
import { EXAMPLE } from '../shared/examples.js';
import { requestContext } from '../shared/request-context.js';
import { json } from '../shared/responses.js';
import { listLegalViews } from '../storage/repos/legal.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * Developer legal routes (docs/reference/rest-api.md#legal-documents), inside the authenticated `/v1/dev` scope:
 * `PUT /apps/{id}/legal/{docType}?lang=` publishes a new version (201), and
 * `GET /apps/{id}/legal/views?from&to` lists view counts per (docType, lang, version, day).
 */

const AppParams = z.strictObject({ id: z.string().min(1).max(200) });
const AppDocParams = AppParams.extend(DocTypeParams.shape);

const DAY = z
  .string()
  .regex(/^\d{4}-\d{2}-\d{2}$/, 'must be YYYY-MM-DD')
  .refine((d) => !Number.isNaN(Date.parse(`${d}T00:00:00Z`)) && new Date(`${d}T00:00:00Z`).toISOString().startsWith(d), 'must be a real date');
const ViewsQuery = z.strictObject({ from: DAY.optional(), to: DAY.optional() });
const MAX_RANGE_DAYS = 366;
const ViewCounts = z.object({
  items: z.array(z.object({ docType: z.string(), lang: z.string(), version: z.number().int(), day: z.string().describe('YYYY-MM-DD (UTC).'), count: z.number().int() })),
});

/** View counts of an app's documents over a range (default: the 30 days up to today, at most 366). */
export async function listAppLegalViews(db: Kysely<Database>, now: number, appId: string, range: { from?: string; to?: string }) {
  const to = range.to ?? dayOf(now);
  const from = range.from ?? dayOf(Date.parse(`${to}T00:00:00Z`) / 1000 - 29 * 86_400);
  const span = (Date.parse(`${to}T00:00:00Z`) - Date.parse(`${from}T00:00:00Z`)) / 86_400_000;
  if (span < 0) throw new AppError('invalid_request', { details: [{ path: 'querystring.from', message: 'must not be after to' }] });
  if (span >= MAX_RANGE_DAYS) throw new AppError('invalid_request', { details: [{ path: 'querystring.to', message: `range must be at most ${MAX_RANGE_DAYS} days` }] });
  return listLegalViews(db, appId, from, to);
}

export default async function devLegalRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // Markdown is rendered in worker threads with a time limit (legal/renderer.ts); stopped with the app.
  const renderer = new MarkdownRenderer();
  app.addHook('onClose', async () => renderer.close());
  app.put(
    '/apps/:id/legal/:docType',
    {
      schema: {
        operationId: 'publishAppLegalDocument',
        summary: "Publish a new version of an app's legal document",
        description: 'The first language published is the default unless a later version sends `default: true`.',
        params: AppDocParams,
        querystring: PublishQuery,
        body: PublishBody,
        response: { 201: json('The published version.', LegalVersion) },
        errors: { 404: ['not_found'], 503: ['service_unavailable'] },
        examples: {
          privacy: {
            summary: 'A privacy policy in English',
            params: { id: EXAMPLE.appId, docType: 'privacy' },
            query: { lang: 'en' },
            body: { title: 'Privacy policy', content: '# Privacy\n\nWe keep what you give us.' },
            status: 201,
            response: {
              docType: 'privacy',
              appId: EXAMPLE.appId,
              lang: 'en',
              version: 1,
              title: 'Privacy policy',
              content: '# Privacy\n\nWe keep what you give us.',
              content_html: '<h1>Privacy</h1>\n<p>We keep what you give us.</p>\n',
              updated_at: EXAMPLE.time,
              url: `http://localhost:3000/legal/apps/${EXAMPLE.appId}/privacy?lang=en`,
            },
          },
        },
      },
    },
    async (request, reply) => {
      const owned = await app.requireOwnedApp(request, request.params.id);
      const version = await publishVersion(app.db, renderer, {
        owner: owned.id,
        docType: request.params.docType,
        lang: request.query.lang ?? 'en',
        body: request.body,
        at: app.clock.now(),
        ctx: requestContext(request),
      });
      return reply.code(201).send(toVersionView(app.config.authUrl, version));
    },
  );

  app.get(
    '/apps/:id/legal/views',
    {
      schema: {
        operationId: 'listAppLegalViews',
        summary: "Count the views of an app's legal documents",
        description: 'Per (docType, lang, version, day); the range defaults to the last 30 days and spans at most 366.',
        params: AppParams,
        querystring: ViewsQuery,
        response: { 200: json('View counts.', ViewCounts) },
        errors: { 404: ['not_found'] },
        examples: {
          june: { summary: 'One month', params: { id: EXAMPLE.appId }, query: { from: '2025-06-01', to: '2025-06-30' }, status: 200, response: { items: [{ docType: 'privacy', lang: 'en', version: 1, day: '2025-06-02', count: 3 }] } },
        },
      },
    },
    async (request) => {
      const owned = await app.requireOwnedApp(request, request.params.id);
      return { items: await listAppLegalViews(app.db, app.clock.now(), owned.id, request.query) };
    },
  );
}
