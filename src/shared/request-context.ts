import type { FastifyReply, FastifyRequest } from 'fastify';

/** Who made a request, as events and logs record it (never a credential), and whether they still wait. */
export interface RequestContext {
  ip?: string | null;
  userAgent?: string | null;
  /**
   * True once the client's connection has closed: no answer can reach it any more, so costly work
   * still waiting for its turn (argon2) is skipped. Asked, not listened for: no listener to remove.
   */
  clientGone?: () => boolean;
  /** The key of the request's DPoP proof, once checked (tokens/dpop.ts): tokens issued for the request are bound to it. */
  dpopJkt?: string;
}

export const requestContext = (request: FastifyRequest): RequestContext => ({
  ip: request.ip,
  userAgent: request.headers['user-agent'] ?? null,
  // The socket, not the request stream: Node marks a request destroyed once its body has been read.
  clientGone: () => request.raw.socket?.destroyed === true,
});

/**
 * Calls `left` once if the client closes its connection before it is answered. Such a request gets no
 * onResponse hook and no `requestCompleted` from Fastify: its answer, if one comes, has nowhere to go.
 * (Its onRequestAbort does not come either once the body has been read.) Attach it when the request
 * arrives: a response emits `close` once, after its answer or when its connection closes first.
 * (`writableEnded`, not `writableFinished`: an injected request's answer is never flushed to a socket.)
 */
export function whenClientLeaves(reply: FastifyReply, left: () => void): void {
  const response = reply.raw;
  response.on('close', () => {
    if (!response.writableEnded) left();
  });
}
