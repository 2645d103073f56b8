import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { accountExportFor } from '../account-export/index.js';
import { authoriseEmailChange } from '../email-change/index.js';
import { sessionAuthentication } from '../plugins/browser-sessions.js';
import { AppError, isAppError } from '../errors.js';
import { formatDateTime } from '../plugins/i18n.js';
import { requestContext } from '../shared/request-context.js';
import { listAppsOfUser } from '../storage/repos/app-users.js';
import { PROFILE_FIELDS } from '../sign-in/profile-data.js';
import { accountSessionsRoutes, accountSessionsView } from './sessions.js';
import { listIdentitiesOfUser } from '../storage/repos/idp.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { FIRST_FACTOR } from '../sign-in/service.js';
import { appLink, carriedQuery, completeBrowserSignIn } from './flow.js';
import { type FormState, formFailure, formState, signInHelp } from './form-state.js';
import { accountMfa } from './mfa.js';
import { accountDeletionSection } from './account-deletion.js';
import { accountPasskeys } from './passkeys.js';
import { localeOf, renderPage } from '../plugins/views.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { passwordRulesOf } from './password-rules.js';

/**
 * `/account` (docs/guides/hosted-pages.md#pages-sessions-and-headers): sign in by password (or a link to the other ways), then the profile
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
  client_id: z.string().max(200).optional(),
  mfa_error: z.string().max(20).optional(),
  deletion_error: z.string().max(20).optional(),
  // The page's language (views.ts localeOf), kept through validation.
  ui_locales: z.string().max(100).optional(),
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
  ui_locales: z.string().max(100).optional(),
});

/** Provider-bind outcomes the account page can explain (anything else shows a generic message). */
const IDP_ERRORS = new Set(['conflict', 'access_denied', 'invalid_id_token', 'invalid_idp_code', 'idp_unavailable', 'idp_oauth_not_configured', 'forbidden']);
const DONE = new Set(['profile', 'password', 'unbound', 'revoked', 'mfa_enrolled', 'mfa_removed']);
const MFA_ERRORS = new Set(['change', 'remove', 'verify_email', 'setup_expired']);

export default async function accountPages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const t = (request: FastifyRequest) => app.messages.translator(localeOf(request));

  async function currentUser(request: FastifyRequest): Promise<UserRow | undefined> {
    const id = request.browserSession?.user_id;
    if (!id) return undefined;
    const user = await findUserById(app.db, id);
    return user && user.status === 'active' ? user : undefined;
  }

  async function render(request: FastifyRequest, reply: FastifyReply, locals: { form?: FormState; notice?: string; email?: string; newEmail?: string } = {}) {
    const session = await app.browserSessions.ensure(request, reply);
    const query = (request.query ?? {}) as AccountQueryInput;
    const tr = t(request);
    const bindEntry = query.bind === '1';
    const user = await currentUser(request);
    const locale = localeOf(request);
    const when = (at: number | string) => formatDateTime(locale, at);
    const backTo = await appLink(request);
    if (!user) {
      return renderPage(request, reply, 'account', {
        titleKey: 'idp.account.title',
        csrf: session.csrf_token,
        signedIn: false,
        formAction: bindEntry ? '/account?bind=1' : '/account',
        bindEntry,
        email: locals.email ?? '',
        form: locals.form,
        notice: query.done === 'signed_out' ? tr('account.signed_out') : undefined,
        backTo,
      });
    }
    const provider = await app.idp.provider();
    const identities = await listIdentitiesOfUser(app.db, user.id);
    const identity = identities.find((i) => !provider || i.issuer === provider.issuer);
    const apps = (await listAppsOfUser(app.db, user.id)).map((a) => ({ id: a.appId, name: a.appName, lastLoginAt: a.lastLoginAt ? when(a.lastLoginAt) : '' }));
    const passkeys = await accountPasskeys(app, user.id);
    let notice = locals.notice;
    let form = locals.form;
    if (!notice && query.bound === '1') notice = tr('idp.account.bound');
    if (!notice && query.done === 'email') notice = tr('email_change.done', { email: user.email });
    if (!notice && query.done && DONE.has(query.done)) notice = tr(`idp.account.done_${query.done}`);
    const mfaError = query.mfa_error && MFA_ERRORS.has(query.mfa_error) ? tr(`mfa.account.error_${query.mfa_error}`) : undefined;
    if (!form && query.idp_error) form = formState({ message: IDP_ERRORS.has(query.idp_error) ? tr(`idp.account.idp_error.${query.idp_error}`) : tr('idp.account.idp_error.generic') });
    return renderPage(request, reply, 'account', {
      titleKey: 'idp.account.title',
      csrf: session.csrf_token,
      signedIn: true,
      wide: true,
      bindEntry,
      user: { email: user.email, name: user.name ?? '', phone_number: user.phone_number ?? '', birthdate: user.birthdate ?? '', emailVerified: user.email_verified === 1 },
      provider: provider ? { name: provider.name } : undefined,
      identity: identity ? { email: identity.email ?? '' } : undefined,
      whereSignedIn: await accountSessionsView(app, request, reply, user.id, session.id_hash, query.done),
      apps,
      passkeys: passkeys && { ...passkeys, items: passkeys.items.map((p) => ({ ...p, createdAt: when(p.createdAt), lastUsedAt: p.lastUsedAt && when(p.lastUsedAt) })) },
      mfa: { ...(await accountMfa(app, user, session)), error: mfaError },
      emailChange: { pending: await app.emailChange.pendingAddress(user.id), needsPassword: user.password_hash !== null, value: locals.newEmail ?? '' },
      deletion: await accountDeletionSection(app, request, user, query.deletion_error),
      notice,
      form,
      // The account page has no app: a change there is checked under the platform default (docs/guides/password-policy.md).
      passwordRules: passwordRulesOf(undefined, app.config.passwordMinLength),
      backTo,
    });
  }

  const CODES = ['invalid_credentials', 'rate_limited', 'user_disabled', 'user_blocked', 'weak_password', 'invalid_request'] as const;

  /** The sign-in form refused: a lockout says how long and offers the other ways. */
  const loginFailure = (request: FastifyRequest, reply: FastifyReply, error: unknown, email?: string) =>
    render(request, reply, { form: formFailure(request, reply, error, { codes: CODES, focus: 'password', help: signInHelp(request, carriedQuery(request)) }), email });

  /**
   * The password form refused. A wrong current password is a failed re-authentication of a
   * signed-in user: 403 with its own message, not the sign-in form's 401 (docs/security/checklist.md#sessions-cookies-and-csrf).
   */
  const passwordFailure = (request: FastifyRequest, reply: FastifyReply, error: unknown) => {
    const wrongCurrent = isAppError(error) && error.code === 'invalid_credentials';
    const form = formFailure(request, reply, error, {
      codes: CODES,
      fieldOf: { invalid_credentials: 'password', weak_password: 'new_password' },
      keys: { invalid_credentials: 'idp.error.wrong_current_password' },
      ...(wrongCurrent ? { status: 403 } : {}),
      passwordRules: passwordRulesOf(undefined, app.config.passwordMinLength),
    });
    return render(request, reply, { form });
  };

  app.get('/account', { schema: { querystring: AccountQuery } }, async (request, reply) => render(request, reply));

  /** Sign in / sign out on the account page. */
  app.post('/account', { schema: { querystring: AccountQuery, body: Form } }, async (request, reply) => {
    const form = request.body;
    const back = request.query.bind === '1' ? '/account?bind=1' : '/account';
    if (form.action === 'logout') {
      await app.browserSessions.signOut(request, reply);
      return reply.redirect('/account?done=signed_out', 303);
    }
    if (form.action !== 'login') throw new AppError('invalid_request', { detail: 'unknown account action' });
    try {
      await app.throttle.hitIp(request);
      if (!form.email || !form.password) throw new AppError('invalid_credentials');
      const ctx = requestContext(request);
      const user = await app.accounts.verifyLogin({ email: form.email, password: form.password }, ctx);
      return await completeBrowserSignIn(request, reply, user, FIRST_FACTOR.password, 'account', back);
    } catch (error) {
      return loginFailure(request, reply, error, form.email);
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
      return render(request, reply, { form: formFailure(request, reply, error, { codes: ['invalid_request'] }) });
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
        { currentPassword: form.password ?? '', newPassword: form.new_password ?? '', keepBrowserSessionIdHash: request.browserSession?.id_hash, locale: localeOf(request) },
        requestContext(request),
      );
    } catch (error) {
      return passwordFailure(request, reply, error);
    }
    return reply.redirect('/account?done=password', 303);
  });

  /**
   * Email change (docs/account/email-change.md), the account page's door: `request` (the new address,
   * and the current password when the account has one; else a sign-in in the last 10 minutes) mails a
   * code and a link to the new address; `confirm` takes the code. The mailed link opens
   * `/account/email/confirm` below. Fields have their own names: the page holds other password forms.
   */
  const EmailForm = z.object({
    csrf: z.string().optional(),
    action: z.enum(['request', 'confirm']),
    new_email: z.string().max(320).optional(),
    current_password: z.string().max(1024).optional(),
    email_code: z.string().max(20).optional(),
    ui_locales: z.string().max(100).optional(),
  });

  const emailFailure = (request: FastifyRequest, reply: FastifyReply, error: unknown, newEmail?: string) => {
    const tr = t(request);
    if (isAppError(error) && error.code === 'invalid_request') {
      reply.code(400);
      const same = error.detail === 'same address';
      return render(request, reply, { form: formState({ fields: { new_email: tr(same ? 'email_change.same' : 'form.error.invalid_email') } }), newEmail });
    }
    if (isAppError(error) && error.code === 'forbidden' && error.details?.[0]?.path === 'reauth') {
      reply.code(403);
      const key = error.details[0].message === 'needs_fresh_sign_in' ? 'email_change.reauth' : 'email_change.reauth_mfa';
      return render(request, reply, { form: formState({ message: tr(key) }), newEmail });
    }
    const form = formFailure(request, reply, error, {
      codes: ['invalid_credentials', 'rate_limited', 'invalid_code', 'code_expired', 'email_taken'],
      fieldOf: { invalid_credentials: 'current_password', invalid_code: 'email_code', code_expired: 'email_code' },
      keys: { invalid_credentials: 'idp.error.wrong_current_password', email_taken: 'email_change.taken' },
      // A wrong current password is a failed re-authentication of a signed-in user (as for the password form).
      ...(isAppError(error) && error.code === 'invalid_credentials' ? { status: 403 } : {}),
    });
    return render(request, reply, { form, newEmail });
  };

  app.post('/account/email', { schema: { body: EmailForm } }, async (request, reply) => {
    const user = await requireUser(request);
    const form = request.body;
    const ctx = { ...requestContext(request), appId: null, locale: localeOf(request) };
    try {
      await app.throttle.hitIp(request);
      if (form.action === 'confirm') {
        await app.emailChange.confirmByCode(user.id, (form.email_code ?? '').trim(), ctx);
        return reply.redirect('/account?done=email#email', 303);
      }
      await app.emailChange.countRequest(user.id);
      app.emailChange.checkNewAddress(user, form.new_email ?? '');
      await authoriseEmailChange(app, user, form.current_password, sessionAuthentication(request.browserSession!), ctx);
      await app.emailChange.request(user, form.new_email ?? '', ctx);
    } catch (error) {
      return emailFailure(request, reply, error, form.new_email);
    }
    return reply.redirect('/account#email', 303);
  });

  /**
   * The link mailed to the new address. A GET changes nothing (mail scanners open links): it shows the
   * address and a button that posts back. Only in a browser signed in as the account the change is for
   * (like the verification link): opened anywhere else it proves nothing about this account.
   */
  const LinkQuery = z.object({ token: z.string().max(200).optional(), ui_locales: z.string().max(100).optional() });
  const renderLink = async (request: FastifyRequest, reply: FastifyReply, token: string, locals: { invalid?: boolean } = {}) => {
    const session = await app.browserSessions.ensure(request, reply);
    const user = await currentUser(request);
    const row = user && !locals.invalid ? await app.emailChange.pendingByLink(user.id, token) : undefined;
    return renderPage(request, reply, 'email-confirm', {
      titleKey: 'email_change.title',
      csrf: session.csrf_token,
      signedIn: Boolean(user),
      token,
      newEmail: row?.email ?? '',
      invalid: Boolean(user) && !row,
    });
  };

  app.get('/account/email/confirm', { schema: { querystring: LinkQuery } }, async (request, reply) => {
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
    return renderLink(request, reply, request.query.token ?? '');
  });

  app.post('/account/email/confirm', { schema: { body: z.object({ csrf: z.string().optional(), token: z.string().max(200), ui_locales: z.string().max(100).optional() }) } }, async (request, reply) => {
    reply.header('cache-control', 'no-store').header('referrer-policy', 'no-referrer');
    const user = await currentUser(request);
    if (!user) return renderLink(request, reply.code(401), request.body.token);
    try {
      await app.throttle.hitIp(request);
      await app.emailChange.confirmByLink(user.id, request.body.token, { ...requestContext(request), appId: null, locale: localeOf(request) });
    } catch (error) {
      if (isAppError(error) && (error.code === 'invalid_token' || error.code === 'code_expired')) return renderLink(request, reply.code(400), request.body.token, { invalid: true });
      if (isAppError(error) && error.code === 'email_taken') {
        return render(request, reply.code(409), { form: formState({ message: t(request)('email_change.taken') }) });
      }
      throw error;
    }
    return reply.redirect('/account?done=email#email', 303);
  });

  /**
   * "Download my data" (docs/account/data-export.md): the whole export (`coverage: full`, every app's
   * profile document included) for the browser session's own account. A GET (a link, no script), that
   * changes nothing but the account's export count. Another site cannot read the answer (no CORS), but a
   * top-level link from it would carry the SameSite=Lax cookie and spend the person's exports: a browser
   * that says the request came from another site (`Sec-Fetch-Site`) is refused (403 `forbidden`).
   */
  app.get('/account/export', async (request, reply) => {
    const site = request.headers['sec-fetch-site'];
    if (site !== undefined && site !== 'same-origin' && site !== 'none') {
      throw new AppError('forbidden', { message: 'Open "Download my data" from your account page.', detail: `export asked from sec-fetch-site ${String(site)}` });
    }
    const user = await requireUser(request);
    const document = await accountExportFor(app, reply, user.id, { coverage: 'full' });
    return reply.send(JSON.stringify(document, null, 2));
  });

  accountSessionsRoutes(app, requireUser);

  app.post('/account/apps', { schema: { body: Form } }, async (request, reply) => {
    const user = await requireUser(request);
    const clientId = request.body.client_id;
    if (request.body.action !== 'deny' || !clientId) throw new AppError('invalid_request', { detail: 'unknown apps action' });
    await app.signIn.revokeConsent({ appId: clientId, userId: user.id, via: 'account' }, requestContext(request));
    return reply.redirect('/account?done=revoked', 303);
  });
}
