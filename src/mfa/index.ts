import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Mfa } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { default as mfaSignInRoutes } from './routes.js';
export type { TotpEnrolment } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    mfa: Mfa;
  }
}

/** `app.mfa`: second factors (authenticator app, recovery codes) and their checks (service.ts). */
async function mfaPlugin(app: FastifyInstance) {
  app.decorate('mfa', new Mfa({ db: app.db, clock: app.clock, config: app.config, throttle: app.throttle, log: app.log }));
}

export default fp(mfaPlugin, { name: 'mfa', dependencies: ['db', 'throttle'] });
