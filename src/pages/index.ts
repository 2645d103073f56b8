import type { FastifyInstance, FastifyRequest } from 'fastify';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { AppError } from '../errors.js';
import { safeEqual } from '../shared/ids.js';
import { findUserById } from '../storage/repos/users.js';
import accountPages from './account.js';
import accountDeletionPages from './account-deletion.js';
import authMailPages from './auth-mail.js';
import brandingRoutes, { brandOf } from './branding.js';
import consentPages from './consent.js';
import continuePages from './continue.js';
import devicePages from './device.js';
import { shownFlowApp } from './flow.js';
import { documentPage } from './docs.js';
import legalPages from './legal.js';
import loginPages from './login.js';
import mfaPages from './mfa.js';
import logoutPages from './logout.js';
import passkeyPages from './passkeys.js';
import languagePages from './language.js';
import registerPages from './register.js';
import { localeOf, renderPage, VIEWS_DIR } from '../plugins/views.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { documentPageIn, form, type PageDoc } from './docs.js';

declare module 'fastify' {
  interface FastifyContextConfig {
    /**
     * Hosted form route: a POST must carry the session's CSRF token (set for every route in the pages
     * scope). A function decides per request, for a route that also takes a request that changes nothing.
     */
    csrf?: boolean | ((request: FastifyRequest) => boolean);
  }
}

/** Files every hosted page uses: the stylesheet and the favicon (also at /favicon.ico, where browsers look unasked). */
const STATIC_ASSETS: Array<[path: string, file: string, type: string]> = [
  ['/assets/gatehouse.css', 'gatehouse.css', 'text/css; charset=utf-8'],
  ['/assets/recovery-codes.js', 'recovery-codes.js', 'text/javascript; charset=utf-8'],
  ['/favicon.svg', 'favicon.svg', 'image/svg+xml'],
  ['/favicon.ico', 'favicon.svg', 'image/svg+xml'],
];

/** Origins a hosted form may be posted from: our own. */
function isOwnOrigin(request: FastifyRequest): boolean {
  const origin = request.headers.origin;
  // `Origin: null` is what browsers send for every POST from a page with Referrer-Policy: no-referrer
  // (Fetch §3.2.5): it says nothing, so the CSRF token alone decides.
  if (origin === undefined || origin === 'null') return true;
  const { authUrl, baseUrl } = request.server.config;
  return origin === new URL(authUrl).origin || origin === new URL(baseUrl).origin;
}

/** A form post must carry its session's CSRF token (field `csrf`) and come from our own origin; else 403. */
export function assertCsrf(request: FastifyRequest): void {
  const sent = (request.body as Record<string, unknown> | undefined)?.csrf;
  const session = request.browserSession;
  if (!isOwnOrigin(request) || typeof sent !== 'string' || !session || !safeEqual(sent, session.csrf_token)) {
    throw new AppError('forbidden', { message: 'This form has expired or was not sent from this site. Go back, reload and try again.', detail: 'CSRF check failed' });
  }
}

/**
 * The hosted-pages scope (docs/guides/hosted-pages.md#pages-sessions-and-headers). Every route registered inside renders HTML errors, accepts
 * form bodies, has the browser session loaded, and — for POST — requires the session's CSRF token
 * (field `csrf`, compared in constant time) and a same-origin `Origin` when one is sent.
 * Page modules register here with `app.register(module)` in `hostedPages` below.
 */
export default async function hostedPages(app: FastifyInstance) {
  app.addHook('onRoute', (route) => {
    route.config = { errorStyle: 'html', acceptForm: true, csrf: true, ...(route.config ?? {}) };
    documentPage(route);
  });
  // A cross-site `text/plain` form post must meet the CSRF check (403), not a parser error.
  app.addContentTypeParser('text/plain', { parseAs: 'string' }, (_request, _body, done) => done(null, {}));

  app.addHook('preHandler', async (request) => {
    request.browserSession = await app.browserSessions.load(request);
    const flowApp = await shownFlowApp(request);
    request.pageBrand = brandOf(flowApp);
    const userId = request.browserSession?.user_id;
    request.localeHints = { user: userId ? ((await findUserById(app.db, userId))?.locale ?? null) : null, app: flowApp?.defaultLocale ?? null };
    const { csrf } = request.routeOptions.config;
    if (request.method !== 'POST' || !(typeof csrf === 'function' ? csrf(request) : csrf)) return;
    assertCsrf(request);
  });

  for (const [path, file, type] of STATIC_ASSETS) {
    const body = readFileSync(join(VIEWS_DIR, 'assets', file), 'utf8');
    app.get(path, async (_request, reply) => reply.type(type).header('cache-control', 'public, max-age=3600').send(body));
  }
  await app.register(brandingRoutes);

  app.get('/error', async (request, reply) => {
    reply.code(400);
    const t = app.messages.translator(localeOf(request));
    return renderPage(request, reply, 'error', { titleKey: 'error.title', code: 'invalid_request', message: t('error.generic') });
  });
  await app.register(languagePages);
  await app.register(loginPages);
  await app.register(registerPages);
  await app.register(consentPages);
  await app.register(logoutPages);
  await app.register(legalPages);
  await app.register(continuePages);
  await app.register(accountPages);
  await app.register(accountDeletionPages);
  await app.register(authMailPages);
  await app.register(mfaPages);
  await app.register(passkeyPages);
  await app.register(devicePages);
}
