import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { appendQuery } from '../shared/url.js';
import { requestContext } from '../shared/request-context.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { appHome, field } from './flow.js';
import { renderPage } from '../plugins/views.js';
import { isRegisteredRedirectUri } from '../shared/redirect-uri-match.js';

/**
 * `GET /oauth/logout?id_token_hint&client_id&post_logout_redirect_uri&state&ui_locales` (docs/reference/oauth.md#endpoints,
 * docs/reference/oauth.md#openid-connect-what-is-implemented; OpenID Connect RP-Initiated Logout 1.0). Policy (docs/security/checklist.md#sessions-cookies-and-csrf): a GET never ends a
 * session by itself, because any site can make a browser send one. A signed-in user gets a
 * confirmation page whose form POSTs (with the CSRF token) to `/oauth/logout`; that ends the browser
 * session server-side. The app is `client_id`, or the audience of `id_token_hint` (an ID token of
 * ours: signature checked, expiry ignored as §2 allows); when both are sent they must agree.
 * `post_logout_redirect_uri` needs that app and must equal one of its registered redirect URIs
 * exactly, otherwise the HTML error page (400) is shown and nothing redirects. Without it, the "signed
 * out" page is shown, in the `ui_locales` language. A user who is not signed in is sent on at once
 * (nothing to confirm). An app may also POST the same parameters as a form (§2: the endpoint MUST
 * accept POST): they are checked, then answered with a 303 to the GET, which (unlike a cross-site
 * POST) carries the SameSite=Lax session cookie.
 */

interface LogoutTarget {
  app?: App;
  redirectUri?: string;
  state?: string;
  uiLocales?: string;
}

async function checkTarget(app: FastifyInstance, input: Record<string, unknown>): Promise<LogoutTarget> {
  const get = (name: string): string | undefined => {
    const v = input[name];
    if (v === undefined) return undefined;
    if (typeof v !== 'string' || v.length > 4096) throw new AppError('invalid_request', { message: `The ${name} parameter is invalid or repeated.` });
    return v === '' ? undefined : v;
  };
  const idTokenHint = get('id_token_hint');
  const redirectUri = get('post_logout_redirect_uri');
  const state = get('state');
  const uiLocales = get('ui_locales');
  const hinted = idTokenHint ? await app.tokens.checkIdTokenHint(idTokenHint) : undefined;
  if (hinted === null) throw new AppError('invalid_request', { message: 'The id_token_hint is not an ID token issued by this server.' });
  const named = get('client_id');
  if (named && hinted && named !== hinted.appId) throw new AppError('invalid_request', { message: 'The client_id does not match the id_token_hint.' });
  const clientId = named ?? hinted?.appId;
  const client = clientId ? await findApp(app.db, clientId) : undefined;
  if (clientId && (!client || client.disabled)) throw new AppError('invalid_client', { status: 400, message: 'This application is unknown or disabled.' });
  if (redirectUri !== undefined) {
    if (!client) throw new AppError('invalid_request', { message: 'post_logout_redirect_uri needs client_id or id_token_hint.' });
    if (!isRegisteredRedirectUri(client.redirectUris, redirectUri)) throw new AppError('invalid_redirect_uri', { message: 'The post_logout_redirect_uri is not registered for this application.' });
  }
  return { app: client, redirectUri, state, uiLocales };
}

/** The confirmation form's hidden fields: what checkTarget resolved (the app, never the hint itself). */
function targetFields(target: LogoutTarget): Array<[string, string]> {
  const fields: Array<[string, string]> = [];
  if (target.app) fields.push(['client_id', target.app.id]);
  if (target.redirectUri) fields.push(['post_logout_redirect_uri', target.redirectUri]);
  if (target.state !== undefined) fields.push(['state', target.state]);
  if (target.uiLocales) fields.push(['ui_locales', target.uiLocales]);
  return fields;
}

function finish(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, target: LogoutTarget, status: 302 | 303) {
  if (target.redirectUri) return reply.redirect(appendQuery(target.redirectUri, { state: target.state }), status);
  // Signed out is not a dead end: the page offers to sign in again, and the way back to the app.
  const home = target.app && !target.app.disabled ? appHome(target.app) : undefined;
  return renderPage(request, reply, 'logout', { titleKey: 'oauth.logout.done_title', done: true, backTo: home && { name: target.app!.name, href: home } });
}

export default async function logoutPages(app: FastifyInstance) {
  app.get('/oauth/logout', async (request, reply) => {
    const target = await checkTarget(app, (request.query ?? {}) as Record<string, unknown>);
    const session = request.browserSession;
    if (!session?.user_id) return finish(app, request, reply, target, 302);
    return renderPage(request, reply, 'logout', { titleKey: 'oauth.logout.title', csrf: session.csrf_token, appName: target.app?.name, fields: targetFields(target), done: false });
  });

  // Every hosted form submits an `action`; an app's logout request has none and changes nothing itself.
  const isConfirmation = (request: FastifyRequest) => field(request.body, 'action') !== '';
  app.post('/oauth/logout', { config: { csrf: isConfirmation } }, async (request, reply) => {
    const body = (request.body ?? {}) as Record<string, unknown>;
    if (!isConfirmation(request)) {
      const target = await checkTarget(app, body);
      return reply.redirect(`/oauth/logout?${new URLSearchParams(targetFields(target)).toString()}`, 303);
    }
    const target = await checkTarget(app, { client_id: body.client_id, post_logout_redirect_uri: body.post_logout_redirect_uri, state: body.state, ui_locales: body.ui_locales });
    if (field(body, 'action') === 'cancel') return reply.redirect('/account', 303);
    const session = request.browserSession;
    // The session and the apps' sign-ins through it end together, with `user.signed_out` and back-channel logouts.
    if (session?.user_id) await app.accountSessions.signOutBrowser(session.user_id, session.id_hash, { ...requestContext(request), viaApp: target.app?.id ?? null });
    await app.browserSessions.signOut(request, reply);
    return finish(app, request, reply, target, 303);
  });
}
