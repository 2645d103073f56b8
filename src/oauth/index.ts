import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { corsHeadersFor, originsOfApp, originsOfApps } from '../shared/cors.js';
import { findApp, listAllApps } from '../storage/repos/apps.js';
import { authorize } from './authorize.js';
import { parseBasic } from './client-auth.js';
import { firstValue } from './params.js';
import { introspect, revoke } from './revoke.js';
import { ParamsBody } from './schemas.js';
import { token } from './token.js';
import { userinfo } from './userinfo.js';

declare module 'fastify' {
  interface FastifyRequest {
    /** The app a CORS-enabled OAuth request was identified as (its origins are allowed). */
    corsAppId?: string;
  }
}

/**
 * The OAuth 2.0 / OpenID Connect core (CONTRACT §4): /oauth/authorize, /oauth/token, /oauth/revoke,
 * /oauth/introspect, /oauth/userinfo. Token-style endpoints answer RFC 6749 §5.2 errors with
 * no-store; authorize renders HTML errors until client and redirect_uri are verified, then redirects.
 * CORS (CONTRACT §14.17, 23) on token, revoke and userinfo only; never on authorize.
 */
export default async function oauth(app: FastifyInstance) {
  /** Allowed origins for a request: the identified app's, else the named client's, else (userinfo, preflight) every app's. */
  async function allowedOrigins(request: FastifyRequest, fallbackAll: boolean): Promise<Set<string> | string[]> {
    let clientId = request.corsAppId;
    if (!clientId) {
      try {
        clientId = parseBasic(request.headers.authorization)?.clientId ?? firstValue(request.body, 'client_id');
      } catch {
        clientId = undefined;
      }
    }
    if (clientId && clientId.length <= 200) {
      const client = await findApp(app.db, clientId);
      if (client) return originsOfApp(client);
    }
    return fallbackAll ? originsOfApps(await listAllApps(app.db)) : [];
  }

  const cors = (fallbackAll: boolean) => async (request: FastifyRequest, reply: FastifyReply) => {
    const origin = request.headers.origin;
    if (origin === undefined) return;
    reply.headers(corsHeadersFor(origin, await allowedOrigins(request, fallbackAll)));
  };
  const preflight = async (request: FastifyRequest, reply: FastifyReply) => {
    const origin = request.headers.origin;
    const allowed = origin === undefined ? [] : originsOfApps(await listAllApps(app.db));
    return reply.code(204).headers(corsHeadersFor(origin, allowed, 'preflight')).send();
  };

  // No automatic HEAD route: a HEAD must not run the flow (it would issue a code nobody receives).
  app.get('/oauth/authorize', { config: { errorStyle: 'html' }, exposeHeadRoute: false }, (request, reply) => authorize(app, request, reply));

  const tokenConfig = { errorStyle: 'oauth' as const, acceptForm: true };
  app.post('/oauth/token', { config: tokenConfig, schema: { body: ParamsBody }, onSend: cors(false) }, (request, reply) => token(app, request, reply));
  app.post('/oauth/revoke', { config: tokenConfig, schema: { body: ParamsBody }, onSend: cors(false) }, (request, reply) => revoke(app, request, reply));
  app.post('/oauth/introspect', { config: tokenConfig, schema: { body: ParamsBody } }, (request, reply) => introspect(app, request, reply));
  app.route({
    method: ['GET', 'POST'],
    url: '/oauth/userinfo',
    config: tokenConfig,
    onSend: cors(true),
    handler: (request, reply) => userinfo(app, request, reply),
  });
  for (const url of ['/oauth/token', '/oauth/revoke', '/oauth/userinfo']) {
    app.options(url, { config: { errorStyle: 'oauth' } }, preflight);
  }
}
