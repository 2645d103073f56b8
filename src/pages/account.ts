import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError, isAppError } from '../errors.js';
import { requestContext } from '../plugins/tokens.js';
import { E164, isValidBirthdate } from '../shared/required-fields.js';
import { isoTime } from '../shared/time.js';
import { listAppsOfUser } from '../storage/repos/app-users.js';
import { listBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { revokeConsent } from '../storage/repos/consents.js';
import { appendEvent } from '../storage/repos/events.js';
import { revokeGrantsOfUser } from '../storage/repos/grants.js';
import { listIdentitiesOfUser } from '../storage/repos/idp.js';
import { findUserById, type UserRow, updateUser } from '../storage/repos/users.js';
import { localeOf, renderPage } from './views.js';
import { isValidDisplayName } from '../shared/user-fields.js';

/**
 * `/account` (CONTRACT §12): sign in by password (or a link to the other ways), then the profile
 * (name, phone, birthdate), the provider binding (bind starts a provider sign-in with intent bind;
 * unbind removes it; events `idp.bound`/`idp.unbound`), password change (current password required;
 * other sessions and refresh tokens revoked), the browser sessions, connected apps with revoke
 * (consent and grants of that app, `consent.revoked`), and sign out. `?bind=1` is the bind entry
 * that `idp_oauth_not_bound` answers point to.
 */

const AccountQuery = z.object({
  bind: z.string().max(4).optional(),
  bound: z.string().max(4).optional(),
  idp_error: z.string().max(40).optional(),
  done: z.string().max(20).optional(),
});
type AccountQueryInput = z.output<typeof AccountQuery>;

const Form = z.object({
  csrf: z.string().optional(),
  action: z.string().max(20).optional(),
  email: z.string().max(320).optional(),
  password: z.string().max(1024).optional(),
  new_password: z.string().max(1024).optional(),
  name: z.string().max(200).optional(),
  phone_number: z.string().max(40).optional(),
  birthdate: z.string().max(20).optional(),
  client_id: z.string().max(200).optional(),
});
type FormInput = z.output<typeof Form>;

/** Provider-bind outcomes the account page can explain (anything else shows a generic message). */
const IDP_ERRORS = new Set(['conflict', 'access_denied', 'invalid_id_token', 'invalid_idp_code', 'idp_unavailable', 'idp_oauth_not_configured', 'forbidden']);
const DONE = new Set(['profile', 'password', 'unbound', 'revoked']);

interface AccountsLike {
  changePassword(userId: string, input: { currentPassword: string; newPassword: string; keepBrowserSessionIdHash?: string }, ctx: { ip?: string | null; userAgent?: string | null }): Promise<void>;
}

export default async function accountPages(app: FastifyInstance) {
  const t = (request: FastifyRequest) => app.messages.translator(localeOf(request));

  async function currentUser(request: FastifyRequest): Promise<UserRow | undefined> {
    const id = request.browserSession?.user_id;
    if (!id) return undefined;
    const user = await findUserById(app.db, id);
    return user && user.status === 'active' ? user : undefined;
  }

  async function render(request: FastifyRequest, reply: FastifyReply, locals: { error?: string; notice?: string; email?: string; section?: string } = {}) {
    const session = await app.browserSessions.ensure(request, reply);
    const query = (request.query ?? {}) as AccountQueryInput;
    const tr = t(request);
    const bindEntry = query.bind === '1';
    const user = await currentUser(request);
    if (!user) {
      return renderPage(request, reply, 'account', {
        titleKey: 'idp.account.title',
        csrf: session.csrf_token,
        signedIn: false,
        formAction: bindEntry ? '/account?bind=1' : '/account',
        bindEntry,
        email: locals.email ?? '',
        error: locals.error,
      });
    }
    const provider = await app.idp.provider();
    const identities = await listIdentitiesOfUser(app.db, user.id);
    const identity = identities.find((i) => !provider || i.issuer === provider.issuer);
    const now = app.clock.now();
    const sessions = (await listBrowserSessionsOfUser(app.db, user.id, now)).map((s) => ({
      current: s.id_hash === session.id_hash,
      createdAt: isoTime(s.created_at),
      lastSeenAt: isoTime(s.last_seen_at),
    }));
    const apps = (await listAppsOfUser(app.db, user.id)).map((a) => ({ id: a.appId, name: a.appName, lastLoginAt: a.lastLoginAt ? isoTime(a.lastLoginAt) : '' }));
    let notice = locals.notice;
    let error = locals.error;
    if (!notice && query.bound === '1') notice = tr('idp.account.bound');
    if (!notice && query.done && DONE.has(query.done)) notice = tr(`idp.account.done_${query.done}`);
    if (!error && query.idp_error) error = IDP_ERRORS.has(query.idp_error) ? tr(`idp.account.idp_error.${query.idp_error}`) : tr('idp.account.idp_error.generic');
    return renderPage(request, reply, 'account', {
      titleKey: 'idp.account.title',
      csrf: session.csrf_token,
      signedIn: true,
      bindEntry,
      user: { email: user.email, name: user.name ?? '', phone_number: user.phone_number ?? '', birthdate: user.birthdate ?? '', emailVerified: user.email_verified === 1 },
      provider: provider ? { name: provider.name } : undefined,
      identity: identity ? { email: identity.email ?? '', createdAt: isoTime(identity.createdAt) } : undefined,
      sessions,
      apps,
      notice,
      error,
    });
  }

  const formFailure = (request: FastifyRequest, reply: FastifyReply, error: unknown, section: string, email?: string) => {
    if (!isAppError(error) || error.status >= 500) throw error;
    // A wrong current password on the password form is a failed re-authentication of a signed-in
    // user: 403 with its own message, not the sign-in form's 401 (SECURITY.md item 58).
    const wrongCurrent = section === 'password' && error.code === 'invalid_credentials';
    reply.code(wrongCurrent ? 403 : error.status);
    if (error.code === 'rate_limited' && typeof error.extra?.retry_after === 'number') reply.header('retry-after', String(error.extra.retry_after));
    const tr = t(request);
    const key = wrongCurrent ? 'idp.error.wrong_current_password' : `idp.error.${error.code}`;
    const translated = tr(key);
    return render(request, reply, { error: translated === key ? error.publicMessage : translated, email, section });
  };

  app.get<{ Querystring: AccountQueryInput }>('/account', { schema: { querystring: AccountQuery } }, async (request, reply) => render(request, reply));

  /** Sign in / sign out on the account page. */
  app.post<{ Querystring: AccountQueryInput; Body: FormInput }>('/account', { schema: { querystring: AccountQuery, body: Form } }, async (request, reply) => {
    const form = request.body;
    const back = request.query.bind === '1' ? '/account?bind=1' : '/account';
    if (form.action === 'logout') {
      await app.browserSessions.signOut(request, reply);
      return reply.redirect('/account', 303);
    }
    if (form.action !== 'login') throw new AppError('invalid_request', { detail: 'unknown account action' });
    try {
      const throttle = (app as unknown as { throttle?: { hitIp(r: FastifyRequest): Promise<void> } }).throttle;
      if (throttle) await throttle.hitIp(request);
      if (!form.email || !form.password) throw new AppError('invalid_credentials');
      const user = await app.idp.verifyPassword(request, form.email, form.password);
      await app.browserSessions.signIn(request, reply, user.id);
      return reply.redirect(back, 303);
    } catch (error) {
      return formFailure(request, reply, error, 'login', form.email);
    }
  });

  async function requireUser(request: FastifyRequest): Promise<UserRow> {
    const user = await currentUser(request);
    if (!user) throw new AppError('unauthorized', { message: 'Sign in on the account page first.' });
    return user;
  }

  app.post<{ Body: FormInput }>('/account/idp', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    if (request.body.action === 'bind') {
      try {
        const location = await app.idp.begin(request, reply, { intent: 'bind', userId: user.id });
        return reply.redirect(location, 303);
      } catch (error) {
        if (isAppError(error) && (error.code === 'idp_oauth_not_configured' || error.code === 'idp_unavailable')) {
          return reply.redirect(`/account?idp_error=${error.code}`, 303);
        }
        throw error;
      }
    }
    if (request.body.action === 'unbind') {
      await app.idp.unbind(user.id, requestContext(request));
      return reply.redirect('/account?done=unbound', 303);
    }
    throw new AppError('invalid_request', { detail: 'unknown provider action' });
  });

  app.post<{ Body: FormInput }>('/account/profile', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const form = request.body;
    const tr = t(request);
    const patch: Partial<UserRow> = {};
    const name = form.name?.trim();
    if (name !== undefined) {
      if (name && !isValidDisplayName(name)) return render(request, reply.code(400), { error: tr('idp.error.invalid_name') });
      patch.name = name || null;
    }
    const phone = form.phone_number?.trim();
    if (phone !== undefined) {
      if (phone && !E164.test(phone)) return render(request, reply.code(400), { error: tr('idp.error.invalid_phone_number') });
      patch.phone_number = phone || null;
    }
    const birthdate = form.birthdate?.trim();
    if (birthdate !== undefined) {
      if (birthdate && !isValidBirthdate(birthdate)) return render(request, reply.code(400), { error: tr('idp.error.invalid_birthdate') });
      patch.birthdate = birthdate || null;
    }
    await updateUser(app.db, user.id, { ...patch, updated_at: app.clock.now() });
    return reply.redirect('/account?done=profile', 303);
  });

  app.post<{ Body: FormInput }>('/account/password', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const form = request.body;
    const accounts = (app as unknown as { accounts?: AccountsLike }).accounts;
    if (!accounts) throw new AppError('service_unavailable', { detail: 'accounts plugin missing' });
    try {
      const throttle = (app as unknown as { throttle?: { hitIp(r: FastifyRequest): Promise<void> } }).throttle;
      if (throttle) await throttle.hitIp(request);
      await accounts.changePassword(
        user.id,
        { currentPassword: form.password ?? '', newPassword: form.new_password ?? '', keepBrowserSessionIdHash: request.browserSession?.id_hash },
        requestContext(request),
      );
    } catch (error) {
      return formFailure(request, reply, error, 'password');
    }
    return reply.redirect('/account?done=password', 303);
  });

  app.post<{ Body: FormInput }>('/account/apps', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const clientId = request.body.client_id;
    if (request.body.action !== 'deny' || !clientId) throw new AppError('invalid_request', { detail: 'unknown apps action' });
    const now = app.clock.now();
    const ctx = requestContext(request);
    await app.db.transaction().execute(async (trx) => {
      await revokeConsent(trx, clientId, user.id);
      await revokeGrantsOfUser(trx, user.id, now, 'consent_revoked', clientId);
      await appendEvent(trx, now, { type: 'consent.revoked', appId: clientId, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { via: 'account' } });
    });
    return reply.redirect('/account?done=revoked', 303);
  });
}
