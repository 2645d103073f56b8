import type { FastifyInstance } from 'fastify';
import { answerPreflight, corsOnSend } from '../plugins/cors.js';
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

  // These requests name no app: every app's origins. Servers fetching the JWKS (no Origin) never read apps.
  app.addHook('onSend', corsOnSend({ unnamed: 'all-apps' }));
  for (const path of [...DISCOVERY_PATHS, JWKS_PATH]) app.options(path, answerPreflight);

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
