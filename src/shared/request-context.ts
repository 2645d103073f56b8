import type { FastifyRequest } from 'fastify';

/** Who made a request, as events and logs record it (never a credential), and whether they still wait. */
export interface RequestContext {
  ip?: string | null;
  userAgent?: string | null;
  /**
   * True once the client's connection has closed: no answer can reach it any more, so costly work
   * still waiting for its turn (argon2) is skipped. Asked, not listened for: no listener to remove.
   */
  clientGone?: () => boolean;
}

export const requestContext = (request: FastifyRequest): RequestContext => ({
  ip: request.ip,
  userAgent: request.headers['user-agent'] ?? null,
  // The socket, not the request stream: Node marks a request destroyed once its body has been read.
  clientGone: () => request.raw.socket?.destroyed === true,
});
