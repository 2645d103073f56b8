import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { type PasswordRules, passwordRulesOf } from './password-rules.js';
import { requestContext } from '../shared/request-context.js';
import { IDP_SETTING_KEY, getSetting, type IdpSetting } from '../storage/repos/settings.js';
import { localeOf, renderPage } from '../plugins/views.js';
import { FIRST_FACTOR } from '../sign-in/service.js';
import { carriedQuery, completeBrowserSignIn, field, flowApp, resumeOf, shownFlowApp } from './flow.js';
import { type FormState, formFailure, formState, signInHelp } from './form-state.js';
import { loginPasskeys } from './passkeys.js';

/**
 * Hosted sign-in and registration (docs/guides/hosted-pages.md#pages-sessions-and-headers, docs/guides/hosted-pages.md#stable-hooks): `/login` (email + password, a
 * magic-link button posting to the magic-link request page, "Continue with {IDP_NAME}" when a
 * provider is configured) and `/register` (email, password, name, `accept_terms` when the platform
 * terms or privacy policy are published). A successful sign-in rotates the session id and answers 303
 * to the authorization request in flight. Form errors re-render the form with the message (form-state.ts).
 */

/** How the sign-in forms explain a refused sign-in; a lockout says how long and offers the other ways. */
export function signInFailure(request: FastifyRequest, reply: FastifyReply, error: unknown, passwordRules?: PasswordRules, passwordField = 'password'): FormState {
  return formFailure(request, reply, error, {
    codes: ['invalid_credentials', 'rate_limited', 'user_disabled', 'user_blocked', 'email_taken', 'weak_password', 'invalid_request'],
    fieldOf: { email_taken: 'email', weak_password: passwordField },
    focus: 'password',
    help: signInHelp(request, carriedQuery(request)),
    passwordRules,
  });
}

async function providerName(app: FastifyInstance): Promise<string | undefined> {
  if (app.config.idp) return app.config.idp.name;
  const setting = await getSetting<IdpSetting>(app.db, IDP_SETTING_KEY);
  return setting ? setting.name || 'Identity provider' : undefined;
}

/** Hidden fields for `/oauth/idp/start` from the authorization request in flight (web flow, response_mode=code). */
function idpFields(resume: string | undefined): Array<[string, string]> | undefined {
  // A device sign-in (docs/guides/device-sign-in.md) has no redirect_uri for the provider's web flow to return to.
  if (!resume?.startsWith('/oauth/authorize?')) return undefined;
  const q = new URLSearchParams(resume.slice(resume.indexOf('?') + 1));
  const fields: Array<[string, string]> = [];
  for (const key of ['client_id', 'redirect_uri', 'state', 'code_challenge', 'code_challenge_method', 'nonce', 'scope']) {
    const v = q.get(key);
    if (v !== null) fields.push([key, v]);
  }
  fields.push(['response_mode', 'code']);
  return fields;
}

export default async function loginPages(app: FastifyInstance) {
  async function renderLogin(request: FastifyRequest, reply: FastifyReply, locals: { form?: FormState; email?: string; expired?: boolean }) {
    const session = await app.browserSessions.ensure(request, reply);
    const resume = resumeOf(request);
    const client = await shownFlowApp(request);
    const name = await providerName(app);
    const fields = name ? idpFields(resume) : undefined;
    const carried = carriedQuery(request);
    const query = (request.query ?? {}) as Record<string, unknown>;
    return renderPage(request, reply, 'login', {
      titleKey: 'oauth.login.title',
      csrf: session.csrf_token,
      appName: client?.name,
      form: locals.form,
      email: locals.email ?? (typeof query.login_hint === 'string' ? query.login_hint.slice(0, 320) : ''),
      formAction: `/login${carried}`,
      magicLinkAction: `/magic-link/request${carried}`,
      forgotHref: `/password/forgot${carried}`,
      registerHref: `/register${carried}`,
      idp: name && fields ? { name, fields } : undefined,
      passkeys: loginPasskeys(app, carried),
      // A password past the app's maximum age: the same form asks for a new one (docs/guides/password-policy.md).
      expired: locals.expired === true,
      passwordRules: passwordRulesOf(client?.passwordPolicy, app.config.passwordMinLength),
    });
  }

  app.get('/login', async (request, reply) => renderLogin(request, reply, {}));

  app.post('/login', async (request, reply) => {
    const email = field(request.body, 'email').trim();
    const password = field(request.body, 'password');
    if (field(request.body, 'action') === 'send_magic_link') return reply.redirect(`/magic-link/request${carriedQuery(request)}`, 303);
    try {
      await app.throttle.hitIp(request);
    } catch (error) {
      return renderLogin(request, reply, { form: signInFailure(request, reply, error), email: email.slice(0, 320) });
    }
    if (!email || !password || email.length > 320 || password.length > 1024) {
      reply.code(400);
      const t = app.messages.translator(localeOf(request));
      const form = formState({
        fields: {
          email: !email ? t('form.error.email_missing') : email.length > 320 ? t('form.error.email_invalid') : undefined,
          password: !password ? t('form.error.password_missing') : password.length > 1024 ? t('form.error.password_too_long') : undefined,
        },
      });
      return renderLogin(request, reply, { form, email: email.slice(0, 320) });
    }
    const client = await flowApp(request);
    const newPassword = field(request.body, 'new_password') || undefined;
    try {
      const ctx = requestContext(request);
      const user = await app.accounts.verifyLogin({ email, password, newPassword, locale: localeOf(request), passwordPolicy: client?.passwordPolicy }, { ...ctx, appId: client?.id });
      return await completeBrowserSignIn(request, reply, user, FIRST_FACTOR.password, 'hosted_login');
    } catch (error) {
      const expired = error instanceof AppError && error.code === 'password_expired';
      if (expired) reply.code(403);
      // A refused new password (after password_expired) is shown next to the new-password field.
      const renewing = newPassword !== undefined && error instanceof AppError && error.code === 'weak_password';
      const rules = passwordRulesOf(client?.passwordPolicy, app.config.passwordMinLength);
      return renderLogin(request, reply, { form: expired ? undefined : signInFailure(request, reply, error, rules, renewing ? 'new_password' : 'password'), email, expired: expired || renewing });
    }
  });
}
