import type { FastifyInstance, FastifyReply } from 'fastify';
import { AppError } from '../errors.js';
import { corsOnSend, headerClientId } from '../plugins/cors.js';
import { authenticateAtApp } from '../sign-in/requesting-app.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { json, shareRouteDocs } from '../shared/responses.js';
import { AccountExport, type AccountExportDocument } from './schemas.js';
import { buildAccountExport, exportFileName, type ExportAudience } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { AccountExport, EXPORT_FORMAT, type AccountExportDocument } from './schemas.js';
export type { ExportAudience } from './service.js';

/**
 * "Download my data" (docs/account/data-export.md): one JSON document of everything Gatehouse holds
 * about a person, never a hash or secret. Two doors, one limit (EXPORT_PER_HOUR per account, both doors
 * together): `GET /v1/auth/account/export` with the person's access token from an app (`coverage: app`),
 * and `GET /account/export` on the hosted account page with the browser session (`coverage: full`,
 * src/pages/account.ts).
 */

const HOUR = 3600;

/**
 * The export of `userId` for `audience`, counted against the account's limit first (429 `rate_limited`
 * with Retry-After over it). The reply gets the download headers: an attachment, never cached.
 */
export async function accountExportFor(app: FastifyInstance, reply: FastifyReply, userId: string, audience: ExportAudience): Promise<AccountExportDocument> {
  await app.throttle.hitKey(`export:${userId}`, app.config.throttle.exportPerHour, HOUR);
  const now = app.clock.now();
  const document = await buildAccountExport(app.db, userId, audience, now);
  if (!document) throw new AppError('unauthorized', { detail: 'the account is gone' });
  reply
    .header('cache-control', 'no-store')
    .header('pragma', 'no-cache')
    .header('content-disposition', `attachment; filename="${exportFileName(now)}"`)
    .type('application/json; charset=utf-8');
  return document;
}

/** `GET /v1/auth/account/export` (registered under the prefix `/v1/auth/account`). */
export default async function accountExportRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // CORS for single-page apps: the token's app once authenticated (preflights: /v1/auth's OPTIONS route).
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'none' }));
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, { tags: ['auth'], security: [{ accessToken: [] }], errors: { 401: ['unauthorized'], 403: ['feature_disabled'], 429: ['rate_limited'] } }),
  );

  app.get(
    '/export',
    {
      schema: {
        operationId: 'exportAccount',
        summary: "Download the signed-in person's data",
        description:
          "With the person's access token from this app (a session JWT of a pending sign-in is refused). One JSON document (`format` `gatehouse.account-export/1`) as an attachment " +
          '(`Content-Disposition: attachment; filename="gatehouse-export-YYYY-MM-DD.json"`, `Cache-Control: no-store`): the account, and of what is kept per app only what belongs to this app ' +
          "(`coverage: app`): its membership and consent, sign-ins, profile document, legal documents and events, account-wide passkeys and this app's. " +
          "Other apps' profile documents, consents, sign-ins and events are only in the export the person downloads on the hosted account page (`coverage: full`). " +
          'Never a hash, secret, key or token. At most EXPORT_PER_HOUR (5) exports per account in any hour, the account page\'s included.',
        response: {
          200: json('The export (an attachment).', AccountExport, {
            'content-disposition': { description: '`attachment; filename="gatehouse-export-YYYY-MM-DD.json"` (UTC date).', type: 'string' },
            'cache-control': { description: '`no-store`.', type: 'string' },
          }),
        },
      },
    },
    async (request, reply) => {
      const identity = await authenticateAtApp(app.tokens, request);
      return accountExportFor(app, reply, identity.userId, { coverage: 'app', appId: identity.appId });
    },
  );
}
