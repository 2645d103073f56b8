import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { appendQuery } from '../shared/url.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { field } from './flow.js';
import { renderPage } from '../plugins/views.js';

/**
 * `GET /oauth/logout?client_id&post_logout_redirect_uri&state` (CONTRACT §4). Policy (SECURITY.md
 * item 54): a GET never ends a session by itself, because any site can make a browser send one.
 * A signed-in user gets a confirmation page whose form POSTs (with the CSRF token) to
 * `/oauth/logout`; that ends the browser session server-side. `post_logout_redirect_uri` needs
 * `client_id` and must equal one of that app's registered redirect URIs exactly, otherwise the
 * HTML error page (400) is shown and nothing redirects. Without it, the "signed out" page is shown.
 * A user who is not signed in is sent on at once (nothing to confirm).
 */

interface LogoutTarget {
  app?: App;
  redirectUri?: string;
  state?: string;
}

async function checkTarget(app: FastifyInstance, input: Record<string, unknown>): Promise<LogoutTarget> {
  const get = (name: string): string | undefined => {
    const v = input[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length > 4096) throw new AppError('invalid_request', { message: `The ${name} parameter is invalid or repeated.` });
    return v === '' ? undefined : v;
  };
  const clientId = get('client_id');
  const redirectUri = get('post_logout_redirect_uri');
  const state = get('state');
  const client = clientId ? await findApp(app.db, clientId) : undefined;
  if (clientId && (!client || client.disabled)) throw new AppError('invalid_client', { status: 400, message: 'This application is unknown or disabled.' });
  if (redirectUri !== undefined) {
    if (!client) throw new AppError('invalid_request', { message: 'post_logout_redirect_uri needs client_id.' });
    if (!client.redirectUris.includes(redirectUri)) throw new AppError('invalid_redirect_uri', { message: 'The post_logout_redirect_uri is not registered for this application.' });
  }
  return { app: client, redirectUri, state };
}

function finish(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, target: LogoutTarget, status: 302 | 303) {
  if (target.redirectUri) return reply.redirect(appendQuery(target.redirectUri, { state: target.state }), status);
  return renderPage(request, reply, 'logout', { titleKey: 'oauth.logout.done_title', done: true });
}

export default async function logoutPages(app: FastifyInstance) {
  app.get('/oauth/logout', async (request, reply) => {
    const target = await checkTarget(app, (request.query ?? {}) as Record<string, unknown>);
    const session = request.browserSession;
    if (!session?.user_id) return finish(app, request, reply, target, 302);
    const fields: Array<[string, string]> = [];
    if (target.app) fields.push(['client_id', target.app.id]);
    if (target.redirectUri) fields.push(['post_logout_redirect_uri', target.redirectUri]);
    if (target.state !== undefined) fields.push(['state', target.state]);
    return renderPage(request, reply, 'logout', { titleKey: 'oauth.logout.title', csrf: session.csrf_token, appName: target.app?.name, fields, done: false });
  });

  app.post('/oauth/logout', async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    const target = await checkTarget(app, { client_id: body.client_id, post_logout_redirect_uri: body.post_logout_redirect_uri, state: body.state });
    if (field(body, 'action') === 'cancel') return reply.redirect('/account', 303);
    await app.browserSessions.signOut(request, reply);
    return finish(app, request, reply, target, 303);
  });
}
