import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { Purger } from './service.js';

/**
 * Maintenance jobs that run in every process: the purge of expired rows and of accounts whose deletion
 * grace is over (`app.purge`, service.ts).
 * Started when the app is ready, stopped when it closes; `app.purge.runOnce()` runs it on demand
 * (tests, `gatehouse purge`).
 */

declare module 'fastify' {
  interface FastifyInstance {
    purge: Purger;
  }
}

async function maintenancePlugin(app: FastifyInstance) {
  const purger = new Purger({ db: app.db, dialect: app.dialect, clock: app.clock, config: app.config, log: app.log.child({ job: 'purge' }), deletions: app.accountDeletion });
  app.decorate('purge', purger);
  app.addHook('onReady', async () => purger.start());
  app.addHook('onClose', async () => purger.stop());
}

export default fp(maintenancePlugin, { name: 'maintenance', dependencies: ['db', 'account-deletion'] });
