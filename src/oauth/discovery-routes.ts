import type { FastifyInstance } from 'fastify';
import { corsHeadersFor, originsOfApps } from '../shared/cors.js';
import { listAllApps } from '../storage/repos/apps.js';
import { discoveryDocument } from './discovery.js';

/**
 * Public metadata: both discovery documents and the JWKS (CONTRACT §4), with CORS for the origins of
 * all apps (CONTRACT §14.23: these requests name no app) and answers to their preflights.
 */

const CACHE_CONTROL = 'public, max-age=300';
const DISCOVERY_PATHS = ['/.well-known/openid-configuration', '/.well-known/oauth-authorization-server'];
const JWKS_PATH = '/oauth/jwks';

export default async function discoveryRoutes(app: FastifyInstance) {
  const document = discoveryDocument(app.config.baseUrl);

  // Apps are only read when a browser sends an Origin; servers fetching the JWKS never pay for it.
  app.addHook('onRequest', async (request, reply) => {
    const origin = request.headers.origin;
    const allowed = origin ? originsOfApps(await listAllApps(app.db)) : [];
    reply.headers(corsHeadersFor(origin, allowed, request.method === 'OPTIONS' ? 'preflight' : 'actual'));
  });

  for (const path of [...DISCOVERY_PATHS, JWKS_PATH]) app.options(path, async (_request, reply) => reply.code(204).send());

  for (const path of DISCOVERY_PATHS) {
    app.get(path, async (_request, reply) => {
      reply.header('cache-control', CACHE_CONTROL);
      return document;
    });
  }
  app.get(JWKS_PATH, async (_request, reply) => {
    reply.header('cache-control', CACHE_CONTROL);
    return app.keys.jwks();
  });
}
