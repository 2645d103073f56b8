import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { LogoutDeliverer } from './deliverer.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { LogoutDeliverer } from './deliverer.js';
export { BACKCHANNEL_LOGOUT_EVENT, LOGOUT_TOKEN_TTL, logoutClaims } from './token.js';

declare module 'fastify' {
  interface FastifyInstance {
    /** The background deliverer of back-channel logout tokens (docs/guides/back-channel-logout.md). */
    logoutDeliverer: LogoutDeliverer;
  }
}

/**
 * OpenID Connect Back-Channel Logout 1.0 (docs/guides/back-channel-logout.md): every grant revocation
 * queues logout tokens in its own transaction (storage/repos/grants.ts); this process's deliverer sends
 * them, started when the app is ready and stopped when it closes. The URIs obey the webhooks' target
 * policy (shared/targets.ts).
 */
async function backchannelLogoutPlugin(app: FastifyInstance) {
  const deliverer = new LogoutDeliverer({
    db: app.db,
    clock: app.clock,
    log: app.log,
    policy: { publicOnly: app.config.webhooks.publicOnly },
    sign: (claims, options) => app.keys.sign(claims, options),
  });
  app.decorate('logoutDeliverer', deliverer);
  app.addHook('onReady', async () => deliverer.start());
  app.addHook('onClose', async () => deliverer.stop());
}

export const backchannelLogoutServicePlugin = fp(backchannelLogoutPlugin, { name: 'backchannel-logout', dependencies: ['db'] });
