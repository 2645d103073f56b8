import type { FastifyInstance, FastifyRequest } from 'fastify';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { renderPage, VIEWS_DIR } from '../plugins/views.js';
import { html, redirect, shareRouteDocs, text } from '../shared/responses.js';
import { type App, findApp, listAllApps } from '../storage/repos/apps.js';
import { isLoopbackHost } from '../shared/loopback.js';
import { isRegisteredRedirectUri } from '../shared/redirect-uri-match.js';

/**
 * `/demo` (docs/guides/run-and-test.md#run-it; only when NODE_ENV is not production): a small single-page client that runs
 * the full authorization-code + PKCE flow against this service with the bootstrap app `demo` (or the
 * app named by `?client_id=`), then at `/demo/callback` exchanges the code, shows the decoded tokens
 * and the userinfo answer, and can refresh. All logic is in `views/assets/demo.js` (CSP: 'self' only).
 * Opened on another loopback name than {base_url}'s (127.0.0.1, localhost, [::1]), it first redirects
 * to {base_url}: the flow keeps its PKCE verifier in the page origin's sessionStorage and comes back to
 * {base_url}/demo/callback, so it must start on that same origin.
 */
export default async function demo(app: FastifyInstance) {
  const script = readFileSync(join(VIEWS_DIR, 'assets', 'demo.js'), 'utf8');
  const callbackUri = `${app.config.baseUrl}/demo/callback`;
  const configured = new URL(app.config.baseUrl);

  /** Where to start over when the page was opened on another loopback host than {base_url}'s; undefined otherwise. */
  function configuredLoopbackUrl(request: FastifyRequest): string | undefined {
    if (!isLoopbackHost(configured.hostname)) return undefined;
    let opened: URL;
    try {
      opened = new URL(`http://${request.host}`);
    } catch {
      return undefined;
    }
    // Host names only: a port that differs means a port mapping or proxy in front, not another origin to fix.
    if (!isLoopbackHost(opened.hostname) || opened.hostname === configured.hostname) return undefined;
    const query = request.url.indexOf('?');
    return `${app.config.baseUrl}/demo${query < 0 ? '' : request.url.slice(query)}`;
  }

  async function demoApp(clientId: unknown): Promise<App | undefined> {
    if (typeof clientId === 'string' && clientId.length <= 200) {
      const named = await findApp(app.db, clientId);
      return named && isRegisteredRedirectUri(named.redirectUris, callbackUri) ? named : undefined;
    }
    const apps = await listAllApps(app.db);
    return apps.find((a) => a.name === 'demo' && !a.disabled && isRegisteredRedirectUri(a.redirectUris, callbackUri));
  }

  const routeConfig = { config: { errorStyle: 'html' as const } };
  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['development'] }));

  app.get('/assets/demo.js', { schema: { operationId: 'getDemoScript', summary: 'The script of the demo client', response: { 200: text('The script.', 'text/javascript') } } }, async (_request, reply) =>
    reply.type('text/javascript; charset=utf-8').header('cache-control', 'no-cache').send(script),
  );

  app.get(
    '/demo',
    {
      ...routeConfig,
      schema: {
        operationId: 'demoPage',
        summary: 'The demo client',
        description:
          'Runs the authorization-code flow with PKCE for the app `demo` (or `?client_id=`, an app with the demo redirect URI). Opened on another loopback host than `{base_url}` (127.0.0.1, localhost, [::1]), it redirects to `{base_url}/demo` first.',
        response: { 200: html('The demo client.'), 302: redirect('`{base_url}/demo`, when opened on another loopback host') },
      },
    },
    async (request, reply) => {
      const restart = configuredLoopbackUrl(request);
      if (restart) return reply.redirect(restart, 302);
      const client = await demoApp((request.query as Record<string, unknown>).client_id);
      return renderPage(request, reply, 'demo', {
        titleKey: 'demo.title',
        clientId: client?.id,
        appName: client?.name,
        type: client?.type,
        redirectUri: callbackUri,
        authorizeEndpoint: `${app.config.baseUrl}/oauth/authorize`,
      });
    },
  );

  app.get(
    '/demo/callback',
    { ...routeConfig, schema: { operationId: 'demoCallbackPage', summary: "The demo client's redirect URI", response: { 200: html('Exchanges the code and shows the tokens.') } } },
    async (request, reply) =>
    renderPage(request, reply, 'demo-callback', {
      titleKey: 'demo.title',
      tokenEndpoint: `${app.config.baseUrl}/oauth/token`,
      userinfoEndpoint: `${app.config.baseUrl}/oauth/userinfo`,
      logoutEndpoint: `${app.config.baseUrl}/oauth/logout`,
      redirectUri: callbackUri,
      // The token JSON needs the width of a page, not of a sign-in card.
      wide: true,
    }),
  );
}
