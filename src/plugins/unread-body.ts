import type { FastifyReply, FastifyRequest } from 'fastify';

/** How much of a refused body is read and thrown away, at most, so its client sees the answer. */
export const DISCARD_LIMIT_BYTES = 8 * 1024 * 1024;
/** How long a client still sending a refused body is given to finish. */
export const DISCARD_LIMIT_MS = 10_000;

/**
 * An error answered before its request's body has fully arrived (a body over the limit): closing the
 * connection right after the answer, as Fastify asks, makes the kernel reset it while the client is
 * still writing, and the reset can arrive before the answer is read (EPIPE/ECONNRESET instead of 413).
 * So the connection stays open and the rest of the body is read and discarded, up to
 * DISCARD_LIMIT_BYTES within DISCARD_LIMIT_MS; a client sending more, or for longer, is cut off.
 */
export function discardUnreadBody(request: FastifyRequest, reply: FastifyReply): void {
  const incoming = request.raw;
  const socket = incoming.socket;
  // Injected requests (light-my-request) have no real socket; a complete or abandoned body has nothing left to drain.
  if (incoming.complete || typeof socket?.destroy !== 'function' || socket.destroyed) return;
  reply.removeHeader('connection');
  let discarded = 0;
  const cutOff = () => socket.destroy();
  const timer = setTimeout(cutOff, DISCARD_LIMIT_MS);
  timer.unref();
  const stop = () => clearTimeout(timer);
  incoming.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > DISCARD_LIMIT_BYTES) {
      stop();
      cutOff();
    }
  });
  // A socket closed first needs nothing: the timer then destroys what is already destroyed.
  incoming.once('end', stop);
  incoming.resume();
}
