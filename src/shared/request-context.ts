import type { FastifyRequest } from 'fastify';

/** Who made a request, as events and logs record it (never a credential). */
export interface RequestContext {
  ip?: string | null;
  userAgent?: string | null;
}

export const requestContext = (request: FastifyRequest): RequestContext => ({
  ip: request.ip,
  userAgent: request.headers['user-agent'] ?? null,
});
