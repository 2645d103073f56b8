import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import type { Clock } from '../shared/time.js';
import type { Dialect, Storage } from '../storage/connect.js';
import type { Database } from '../storage/schema.js';

declare module 'fastify' {
  interface FastifyInstance {
    config: ResolvedConfig;
    db: Kysely<Database>;
    dialect: Dialect;
    storage: Storage;
    clock: Clock;
  }
}

export interface CorePluginOptions {
  config: ResolvedConfig;
  storage: Storage;
  clock: Clock;
  /** Close the storage when the app closes (false when the caller owns it, e.g. tests sharing a database). */
  ownsStorage: boolean;
}

/** The shared decorators every feature reads: config, database, clock. */
async function corePlugin(app: FastifyInstance, options: CorePluginOptions) {
  app.decorate('config', options.config);
  app.decorate<Storage>('storage', options.storage);
  app.decorate('db', options.storage.db);
  app.decorate('dialect', options.storage.dialect);
  app.decorate('clock', options.clock);
  if (options.ownsStorage) app.addHook('onClose', async () => options.storage.close());
}

export default fp(corePlugin, { name: 'db' });
