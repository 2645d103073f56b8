import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

/**
 * Where a process is in its shutdown (docs/operations/deploy.md "Restarts without dropped requests").
 * `draining`: every answer carries `Connection: close`, so keep-alive clients (a proxy) open their next
 * connection elsewhere; `leaving`: /readyz answers 503 so the proxy's health check takes this process
 * out. A cluster worker being replaced drains without leaving: its siblings keep the instance ready.
 */
export class Lifecycle {
  draining = false;
  leaving = false;
}

declare module 'fastify' {
  interface FastifyInstance {
    lifecycle: Lifecycle;
  }
}

async function lifecyclePlugin(app: FastifyInstance) {
  const lifecycle = new Lifecycle();
  app.decorate('lifecycle', lifecycle);
  // Callback style: it runs on every request. Not while a refused body is still arriving: that
  // connection stays open until the body is read (plugins/unread-body.ts).
  app.addHook('onSend', (request, reply, payload, done) => {
    if (lifecycle.draining && request.raw.complete) reply.header('connection', 'close');
    done(null, payload);
  });
}

export default fp(lifecyclePlugin, { name: 'lifecycle' });
