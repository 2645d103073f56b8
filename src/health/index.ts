import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { json } from '../shared/responses.js';
import { quietWhenOk } from '../plugins/logger.js';

const Live = z.object({ status: z.literal('ok') });
const Ready = z.object({
  status: z.enum(['ok', 'unavailable']),
  database: z.enum(['ok', 'unreachable']),
  /** Present (true) once SIGTERM started the drain: the process still serves, but is leaving. */
  shutting_down: z.literal(true).optional(),
});

/** Liveness and readiness (docs/guides/run-and-test.md#run-it). */
export default async function healthRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/healthz',
    {
      onRequest: quietWhenOk,
      schema: {
        operationId: 'getLiveness',
        tags: ['operations'],
        summary: 'Liveness: the process is up',
        response: { 200: json('Up.', Live) },
        examples: { live: { summary: 'Up', status: 200, response: { status: 'ok' } } },
      },
    },
    async () => ({ status: 'ok' as const }),
  );
  app.get(
    '/readyz',
    {
      onRequest: quietWhenOk,
      schema: {
        operationId: 'getReadiness',
        tags: ['operations'],
        summary: 'Readiness: the database is reachable and the process is not shutting down',
        response: { 200: json('Ready.', Ready), 503: json('The database cannot be reached, or the process is shutting down.', Ready) },
        examples: { ready: { summary: 'Ready', status: 200, response: { status: 'ok', database: 'ok' } } },
      },
    },
    async (_request, reply) => {
      const reachable = await app.storage.ping();
      const database = reachable ? ('ok' as const) : ('unreachable' as const);
      if (app.lifecycle.leaving) return reply.code(503).send({ status: 'unavailable', database, shutting_down: true });
      return reply.code(reachable ? 200 : 503).send({ status: reachable ? 'ok' : 'unavailable', database });
    },
  );
}
