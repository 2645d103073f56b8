import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';

export interface RegisteredRoute {
  method: string;
  url: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered after this plugin (one entry per method), for the openapi.yaml drift test. */
    routeList: RegisteredRoute[];
  }
}

/** Records routes as they are registered; register it before any route. */
async function routeListPlugin(app: FastifyInstance) {
  const routes: RegisteredRoute[] = [];
  app.decorate('routeList', routes);
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) routes.push({ method, url: route.url });
  });
}

export default fp(routeListPlugin, { name: 'route-list' });
