import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import FindMyWay, { type HTTPMethod } from 'find-my-way';

export interface RegisteredRoute {
  method: string;
  url: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route registered after this plugin (one entry per method), for the openapi.yaml drift test. */
    routeList: RegisteredRoute[];
    /** The methods registered for the path of a URL (empty for an unknown path): the `Allow` of a 405. */
    allowedMethods(url: string): string[];
  }
}

/**
 * Records routes as they are registered; register it before any route. A second router holds the
 * same paths with the same matching options as Fastify's, so a request that matched no route can be
 * told apart: an unknown path (404) or a known path with another method (405, docs/reference/errors.md#refused-before-any-route-runs).
 */
async function routeListPlugin(app: FastifyInstance) {
  const routes: RegisteredRoute[] = [];
  const paths = FindMyWay({ ignoreTrailingSlash: false, maxParamLength: 200 });
  app.decorate('routeList', routes);
  app.decorate('allowedMethods', (url: string) => {
    const path = url.split('?')[0]!;
    const allowed = [...new Set(routes.map((route) => route.method))].filter((method) => paths.find(method as HTTPMethod, path) !== null).sort();
    // CORS preflight wildcards (`OPTIONS /v1/auth/*`) match any path below them: they alone make no path known.
    return allowed.some((method) => method !== 'OPTIONS') ? allowed : [];
  });
  app.addHook('onRoute', (route) => {
    for (const method of [route.method].flat()) {
      routes.push({ method, url: route.url });
      paths.on(method as HTTPMethod, route.url, () => undefined);
    }
  });
}

export default fp(routeListPlugin, { name: 'route-list' });
