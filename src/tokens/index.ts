import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { TokenService } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    tokens: TokenService;
  }
}

/** `app.tokens`: grants, JWTs, refresh rotation and codes, shared by every door that signs users in. */
async function tokensPlugin(app: FastifyInstance) {
  app.decorate('tokens', new TokenService(app.db, app.storage, app.keys, app.config, app.clock));
}

export default fp(tokensPlugin, { name: 'tokens', dependencies: ['db', 'keys'] });
