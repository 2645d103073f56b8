import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import type { Redis } from 'ioredis';
import { Throttle } from './service.js';

declare module 'fastify' {
  interface FastifyInstance {
    throttle: Throttle;
  }
}

async function throttlePlugin(app: FastifyInstance) {
  let redis: Redis | null = null;
  if (app.config.redisUrl) {
    // Loaded only when configured: a server without Redis never holds the client's code.
    const { Redis } = await import('ioredis');
    redis = new Redis(app.config.redisUrl, {
      lazyConnect: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 1,
      connectTimeout: 2000,
      commandTimeout: 500,
      retryStrategy: (times) => Math.min(times * 200, 5000),
    });
    redis.on('error', () => undefined); // reported once per fallback in hitKey
  }
  const throttle = new Throttle(app.db, app.config, app.clock, redis, app.log);
  app.decorate('throttle', throttle);
  app.addHook('onClose', async () => throttle.close());
}

export default fp(throttlePlugin, { name: 'throttle', dependencies: ['db'] });
