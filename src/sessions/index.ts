import type { FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { corsOnSend, headerClientId } from '../plugins/cors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { authenticateAtApp } from '../sign-in/requesting-app.js';
import { consentIsImplied } from '../sign-in/policy.js';
import { requestContext } from '../shared/request-context.js';
import { json, noBody, shareRouteDocs } from '../shared/responses.js';
import { findApp } from '../storage/repos/apps.js';
import { AppError } from '../errors.js';
import { SessionList, SessionParams } from './schemas.js';
import { type SessionEntry, Sessions, type SessionView } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export type { SessionEntry, SessionKind, SessionView } from './service.js';

/**
 * Sessions and devices (docs/account/sessions.md): where a person is signed in — the browser sessions
 * of the hosted pages and each app's grants — and signing out of one, or of everything but this
 * browser. Two doors: the "Where you're signed in" section of `/account` (src/pages/account.ts), and
 * `GET`/`DELETE /v1/auth/sessions` with the person's access token from an app.
 */

declare module 'fastify' {
  interface FastifyInstance {
    accountSessions: Sessions;
  }
}

/** The service, for both doors. */
export const sessionsPlugin = fp(
  async (app: FastifyInstance) => {
    app.decorate('accountSessions', new Sessions(app.db, app.clock, app.config.secretKey));
  },
  { name: 'sessions', dependencies: ['db'] },
);

/** An entry as the REST door shows it (times as ISO 8601). */
const toRest = (s: SessionEntry) => ({
  id: s.id,
  kind: s.kind,
  current: s.current,
  app: s.app,
  browser: s.browser,
  os: s.os,
  device_type: s.deviceType,
  ip_area: s.ipArea,
  created_at: new Date(s.createdAt * 1000).toISOString(),
  last_seen_at: new Date(s.lastSeenAt * 1000).toISOString(),
});

/** `GET /v1/auth/sessions`, `DELETE /v1/auth/sessions/{id}` (registered under the prefix `/v1/auth/sessions`). */
export default async function sessionsRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'none' }));
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, { tags: ['auth'], security: [{ accessToken: [] }], errors: { 401: ['unauthorized'], 403: ['feature_disabled'] } }),
  );

  /**
   * The person of the token and what the token may see: an app's token only that app's grants; a token
   * of an app the platform runs itself (the console: consent implied) the account-wide view.
   */
  async function caller(request: FastifyRequest): Promise<{ userId: string; view: SessionView; appId: string }> {
    const identity = await authenticateAtApp(app.tokens, request);
    const client = await findApp(app.db, identity.appId);
    if (!client) throw new AppError('unauthorized', { detail: 'app gone' });
    const view: SessionView = consentIsImplied(client)
      ? { reach: 'account', currentGrant: identity.grantId }
      : { reach: 'app', appId: identity.appId, currentGrant: identity.grantId };
    return { userId: identity.userId, view, appId: identity.appId };
  }

  app.get(
    '',
    {
      schema: {
        operationId: 'listSessions',
        summary: 'Where the person is signed in (this app)',
        description:
          "With the person's access token from this app: the person's live sign-ins to this app (grants), each with its device (from the user agent), " +
          'the coarse area of its address (IPv4 /24, IPv6 /48) and when it was first and last seen; the one the token belongs to has `current: true`. ' +
          "An app sees only its own grants, never another app's nor the browser sessions of the hosted pages (apps the platform runs itself, such as the console, see all of them).",
        response: { 200: json('The list, most recently seen first.', SessionList) },
      },
    },
    async (request, reply) => {
      const { userId, view } = await caller(request);
      const sessions = await app.accountSessions.list(userId, view);
      return reply.header('cache-control', 'no-store').send({ sessions: sessions.map(toRest) });
    },
  );

  app.delete(
    '/:id',
    {
      schema: {
        operationId: 'revokeSession',
        summary: 'Sign out of one session',
        description:
          'Revokes the grant (its refresh tokens stop working at once and its access tokens are refused from then on), or with a first-party token a browser session. ' +
          'Revoking the current grant signs this app out here. An id this token may not see answers 404 `not_found`, the same as an unknown one.',
        params: SessionParams,
        response: { 204: noBody('Signed out.') },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      const { userId, view, appId } = await caller(request);
      await app.accountSessions.revoke(userId, request.params.id, view, { ...requestContext(request), viaApp: appId });
      return reply.header('cache-control', 'no-store').code(204).send();
    },
  );
}
