import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError, isAppError } from '../errors.js';
import { formatDateTime } from '../plugins/i18n.js';
import { localeOf } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { requestContext } from '../shared/request-context.js';
import type { SessionEntry } from '../sessions/index.js';
import type { UserRow } from '../storage/repos/users.js';

/**
 * The "Where you're signed in" section of `/account` (docs/account/sessions.md,
 * views/partials/account-sessions.eta): the browser sessions of these pages and the app grants, with
 * "Sign out" per entry (`POST /account/sessions`, action `revoke`; the current browser signs out
 * through `POST /account` action `logout`) and "Sign out everywhere else" (action `others`). What was
 * signed out is confirmed once after the redirect (BrowserSessions.showOnce).
 */

type Translate = (key: string, values?: Record<string, string>) => string;

/**
 * The section's view-model: entries with their device, area and times as the person's locale writes
 * them, and the confirmation of a sign-out just made (`done`), shown in the section itself: the
 * redirect lands on `#sessions`, below the page's own notice.
 */
export async function accountSessionsView(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, userId: string, currentIdHash: string, done: string | undefined) {
  const locale = localeOf(request);
  const tr = app.messages.translator(locale) as Translate;
  const when = (at: number) => formatDateTime(locale, at);
  const entries = await app.accountSessions.list(userId, { reach: 'account', currentBrowser: currentIdHash });
  const shown = (s: SessionEntry) => ({
    id: s.id,
    current: s.current,
    device: deviceLabel(tr, s),
    area: s.ipArea ? tr('sessions.area', { area: s.ipArea }) : tr('sessions.area_unknown'),
    firstSeen: tr('sessions.first_seen', { when: when(s.createdAt) }),
    lastSeen: tr('sessions.last_seen', { when: when(s.lastSeenAt) }),
    appName: s.app?.name ?? '',
  });
  // This browser first, then the most recently seen.
  const browsers = entries.filter((s) => s.kind === 'browser').sort((a, b) => Number(b.current) - Number(a.current));
  const grants = entries.filter((s) => s.kind === 'grant');
  return {
    browsers: browsers.map(shown),
    grants: grants.map(shown),
    others: entries.filter((s) => !s.current).length,
    notice: done ? sessionsNotice(app, request, reply, done) : undefined,
  };
}

/** "Chrome on macOS", or what is known of it. */
export function deviceLabel(tr: Translate, s: Pick<SessionEntry, 'browser' | 'os'>): string {
  if (!s.browser && !s.os) return tr('sessions.unknown_device');
  return tr('sessions.device', { browser: s.browser ?? tr('sessions.unknown_browser'), os: s.os ?? tr('sessions.unknown_os') });
}

/** The flash message after a sign-out on the section (`done` of the redirect), or undefined. */
function sessionsNotice(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply, done: string): string | undefined {
  const tr = app.messages.translator(localeOf(request)) as Translate;
  if (done === 'session_revoked') {
    const { what } = app.browserSessions.takeShownOnce<{ what: string }>(request, reply);
    return tr('sessions.done_revoked', { what: typeof what === 'string' ? what : tr('sessions.unknown_device') });
  }
  if (done === 'sessions_others') return tr('sessions.done_others');
  if (done === 'session_gone') return tr('sessions.done_gone');
  return undefined;
}

const SessionsForm = z.object({
  csrf: z.string().optional(),
  action: z.enum(['revoke', 'others']),
  session_id: z.string().max(100).optional(),
  ui_locales: z.string().max(100).optional(),
});

/** `POST /account/sessions` (the pages scope checks the CSRF token). */
export function accountSessionsRoutes(scope: FastifyInstance, requireUser: (request: FastifyRequest) => Promise<UserRow>): void {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.post('/account/sessions', { schema: { body: SessionsForm } }, async (request, reply) => {
    const user = await requireUser(request);
    const current = request.browserSession!;
    const ctx = { ...requestContext(request), viaApp: null };
    if (request.body.action === 'others') {
      await app.accountSessions.revokeOthers(user.id, current.id_hash, ctx);
      return reply.redirect('/account?done=sessions_others#sessions', 303);
    }
    const id = request.body.session_id;
    if (!id) throw new AppError('invalid_request', { detail: 'no session_id' });
    try {
      const view = { reach: 'account' as const, currentBrowser: current.id_hash };
      // This browser signs out through the account page's own sign-out (its cookie goes too).
      const entry = await app.accountSessions.revoke(user.id, id, view, ctx, { keepBrowser: current.id_hash });
      const tr = app.messages.translator(localeOf(request)) as Translate;
      app.browserSessions.showOnce(request, reply, { what: entry.app ? entry.app.name : deviceLabel(tr, entry) });
    } catch (error) {
      if (isAppError(error) && error.code === 'not_found') return reply.redirect('/account?done=session_gone#sessions', 303);
      throw error;
    }
    return reply.redirect('/account?done=session_revoked#sessions', 303);
  });
}
