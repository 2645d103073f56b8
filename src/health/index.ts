import type { FastifyInstance } from 'fastify';

/** Liveness and readiness (CONTRACT §0). */
export default async function healthRoutes(app: FastifyInstance) {
  app.get('/healthz', async () => ({ status: 'ok' }));
  app.get('/readyz', async (_request, reply) => {
    const ok = await app.storage.ping();
    return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'unavailable', database: ok ? 'ok' : 'unreachable' });
  });
}
