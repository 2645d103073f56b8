import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { AppError, isAppError } from '../errors.js';
import { requestContext } from '../shared/request-context.js';
import { isoTime } from '../shared/time.js';
import { listAppsOfUser } from '../storage/repos/app-users.js';
import { listBrowserSessionsOfUser } from '../storage/repos/browser-sessions.js';
import { PROFILE_FIELDS } from '../sign-in/profile-data.js';
import { listIdentitiesOfUser } from '../storage/repos/idp.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { FIRST_FACTOR } from '../sign-in/service.js';
import { completeBrowserSignIn, profileDataError } from './flow.js';
import { accountMfa } from './mfa.js';
import { accountPasskeys } from './passkeys.js';
import { localeOf, renderPage } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

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
  mfa_error: z.string().max(10).optional(),
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

/** Provider-bind outcomes the account page can explain (anything else shows a generic message). */
const IDP_ERRORS = new Set(['conflict', 'access_denied', 'invalid_id_token', 'invalid_idp_code', 'idp_unavailable', 'idp_oauth_not_configured', 'forbidden']);
const DONE = new Set(['profile', 'password', 'unbound', 'revoked', 'mfa_enrolled', 'mfa_removed']);
const MFA_ERRORS = new Set(['change', 'remove']);

export default async function accountPages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
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
    const mfaError = query.mfa_error && MFA_ERRORS.has(query.mfa_error) ? tr(`mfa.account.error_${query.mfa_error}`) : undefined;
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
      passkeys: await accountPasskeys(app, user.id),
      mfa: { ...(await accountMfa(app, user.id)), error: mfaError },
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

  app.get('/account', { schema: { querystring: AccountQuery } }, async (request, reply) => render(request, reply));

  /** Sign in / sign out on the account page. */
  app.post('/account', { schema: { querystring: AccountQuery, body: Form } }, async (request, reply) => {
    const form = request.body;
    const back = request.query.bind === '1' ? '/account?bind=1' : '/account';
    if (form.action === 'logout') {
      await app.browserSessions.signOut(request, reply);
      return reply.redirect('/account', 303);
    }
    if (form.action !== 'login') throw new AppError('invalid_request', { detail: 'unknown account action' });
    try {
      await app.throttle.hitIp(request);
      if (!form.email || !form.password) throw new AppError('invalid_credentials');
      const ctx = requestContext(request);
      const user = await app.accounts.verifyLogin({ email: form.email, password: form.password }, ctx);
      return await completeBrowserSignIn(request, reply, user, FIRST_FACTOR.password, 'account', back);
    } catch (error) {
      return formFailure(request, reply, error, 'login', form.email);
    }
  });

  async function requireUser(request: FastifyRequest): Promise<UserRow> {
    const user = await currentUser(request);
    if (!user) throw new AppError('unauthorized', { message: 'Sign in on the account page first.' });
    return user;
  }

  app.post('/account/idp', { schema: { body: Form } }, async (request, reply) => {
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

  app.post('/account/profile', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const form = request.body;
    // The user's own profile: any field may be set or cleared, by the same rule as the sign-in steps.
    const data = Object.fromEntries(PROFILE_FIELDS.filter((f) => form[f] !== undefined).map((f) => [f, form[f]]));
    try {
      await app.signIn.applyProfileData(app.db, { user, appId: null, data, accepted: PROFILE_FIELDS, allowClear: true, via: 'account' }, requestContext(request));
    } catch (error) {
      return render(request, reply.code(400), { error: profileDataError(request, error) });
    }
    return reply.redirect('/account?done=profile', 303);
  });

  app.post('/account/password', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const form = request.body;
    try {
      await app.throttle.hitIp(request);
      await app.accounts.changePassword(
        user.id,
        { currentPassword: form.password ?? '', newPassword: form.new_password ?? '', keepBrowserSessionIdHash: request.browserSession?.id_hash },
        requestContext(request),
      );
    } catch (error) {
      return formFailure(request, reply, error, 'password');
    }
    return reply.redirect('/account?done=password', 303);
  });

  app.post('/account/apps', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const clientId = request.body.client_id;
    if (request.body.action !== 'deny' || !clientId) throw new AppError('invalid_request', { detail: 'unknown apps action' });
    await app.signIn.revokeConsent({ appId: clientId, userId: user.id, via: 'account' }, requestContext(request));
    return reply.redirect('/account?done=revoked', 303);
  });
}
