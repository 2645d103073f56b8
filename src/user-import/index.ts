import { Readable } from 'node:stream';
import type { FastifyInstance } from 'fastify';
import { json, text } from '../shared/responses.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { ExportQuery, IMPORT_BODY_LIMIT, ImportBody, ImportQuery, ImportResult } from './schemas.js';
import { exportLines, importUsers, parseImportBody, startExport } from './service.js';

// The module's public face: what the CLI uses (docs/architecture/modules.md).
export { IMPORT_MAX_USERS } from './schemas.js';
export { addNdjsonLine, exportLines, importUsers, parseImportBody, startExport, type ParsedImport } from './service.js';

/**
 * `POST /v1/admin/users/import` and `GET /v1/admin/users/export` (docs/guides/migrating-users.md),
 * registered inside the admin API's scope: `Authorization: Bearer $ADMIN_TOKEN` only.
 */
export async function userImportRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // NDJSON is taken as text and split into rows by the service (a bad line is that row's error, not the request's).
  app.addContentTypeParser('application/x-ndjson', { parseAs: 'string' }, (_request, body, done) => done(null, body));

  app.post(
    '/users/import',
    {
      bodyLimit: IMPORT_BODY_LIMIT,
      config: { acceptTypes: ['application/x-ndjson'] },
      schema: {
        operationId: 'importUsers',
        summary: 'Import users with their password hashes',
        description:
          'Up to 10,000 users per request, as a JSON array, as `{ "users": […], "firebase_scrypt": {…} }`, or as `application/x-ndjson`. ' +
          'Each row is checked on its own and reported with its line: `created`, `unchanged` (the same user was imported before), `conflict` ' +
          '(an existing user; never changed) or `invalid` (with a reason; never written). Bodies over 16 MiB answer 413. See docs/guides/migrating-users.md.',
        querystring: ImportQuery,
        body: ImportBody,
        response: { 200: json('One result per row.', ImportResult) },
        examples: {
          import: {
            summary: 'Two bcrypt users, one already imported',
            body: [
              { email: 'ada@example.com', email_verified: true, name: 'Ada Lovelace', external_id: '1815', password_hash: '$2b$10$N9qo8uLOickgx2ZMRZoMyeIjZAgcfl7p92ldGxad68LJZdL17lhWy' },
              { email: 'grace@example.com', external_id: '1906' },
            ],
            status: 200,
            response: {
              dry_run: false,
              summary: { created: 1, unchanged: 1, conflict: 0, invalid: 0 },
              results: [
                { line: 1, status: 'created', email: 'ada@example.com', user_id: 'usr_01k2v6xe5g7j9l1n3q5s7u9w1y' },
                { line: 2, status: 'unchanged', email: 'grace@example.com', user_id: 'usr_01k2v6xe5g7j9l1n3q5s7u9w2z' },
              ],
            },
          },
        },
      },
    },
    async (request) => {
      const parsed = parseImportBody(request.body);
      return importUsers({ db: app.db, secretKey: app.config.secretKey, now: app.clock.now() }, parsed, { dryRun: request.query.dry_run, app: request.query.app, via: 'api' });
    },
  );

  app.get(
    '/users/export',
    {
      schema: {
        operationId: 'exportUsers',
        summary: 'Export users as NDJSON',
        description:
          "Streamed, one user per line in the import's shape, in id order. Password hashes and authenticator-app secrets only with " +
          '`include_password_hashes=true`; every export is recorded as a `users.exported` event saying whether they were included.',
        querystring: ExportQuery,
        response: { 200: text('One user per line.', 'application/x-ndjson') },
      },
    },
    async (request, reply) => {
      const deps = { db: app.db, secretKey: app.config.secretKey, now: app.clock.now() };
      const options = { app: request.query.app, includePasswordHashes: request.query.include_password_hashes, includeApps: request.query.include_apps, via: 'api' as const };
      await startExport(deps, options);
      return reply.type('application/x-ndjson; charset=utf-8').header('cache-control', 'no-store').send(Readable.from(exportLines(deps, options)));
    },
  );
}
