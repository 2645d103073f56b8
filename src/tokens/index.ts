import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Dpop } from './dpop.js';
import { TokenService } from './service.js';

export { DPOP_SIGNING_ALGS } from './dpop.js';

declare module 'fastify' {
  interface FastifyInstance {
    tokens: TokenService;
  }
}

/** `app.tokens`: grants, JWTs, refresh rotation and codes, shared by every door that signs users in. */
async function tokensPlugin(app: FastifyInstance) {
  const { baseUrl, secretKey, dpop: settings } = app.config;
  // The replay cache is the throttle's shared store, registered after this plugin: looked up at the first proof.
  const dpop = new Dpop({ baseUrl, secretKey, nonces: settings.nonces, nonceWindowSeconds: settings.nonceWindowSeconds }, app.clock, (key, ttl) => app.throttle.firstSighting(key, ttl));
  app.decorate('tokens', new TokenService(app.db, app.storage, app.keys, app.config, app.clock, dpop));
}

export default fp(tokensPlugin, { name: 'tokens', dependencies: ['db', 'keys'] });
