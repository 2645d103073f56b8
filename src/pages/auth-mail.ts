import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { isAppError } from '../errors.js';
import type { Translate } from '../plugins/i18n.js';
import { requestContext } from '../shared/request-context.js';
import { findUserById } from '../storage/repos/users.js';
import { FIRST_FACTOR } from '../sign-in/service.js';
import { carriedQuery, completeBrowserSignIn, field, resumeOf, shownFlowApp } from './flow.js';
import { type FormState, formFailure, formState } from './form-state.js';
import { type PasswordRules, passwordRulesOf } from './password-rules.js';
import { localeOf, renderPage } from '../plugins/views.js';

/**
 * Hosted mail-based pages (docs/guides/hosted-pages.md#pages-sessions-and-headers, docs/guides/hosted-pages.md#stable-hooks, docs/security/checklist.md#magic-links-and-reset-links):
 * - `/magic-link/request` (GET form, POST sends the link; the login page's "send_magic_link" posts here);
 * - `/magic-link?token=…` landing: GET/HEAD only show a button (mail scanners never consume the link);
 *   POST (CSRF-bound) consumes it — or an email + code — signs the browser in and returns to the
 *   authorization request in flight (session data `resume`), else `/account`;
 * - `/password/forgot` (neutral answer for every address) and `/password/reset?token=…` (`new_password`;
 *   never signs in);
 * - `/verify-email` (code for the signed-in user; `send_code` mails a new one).
 * Every POST counts against the per-IP limit.
 */

/** How the mail-based forms explain a refusal: code problems next to the code, the rest above the form. */
function mailFormFailure(request: FastifyRequest, reply: FastifyReply, error: unknown, passwordRules?: PasswordRules): FormState {
  return formFailure(request, reply, error, {
    passwordRules,
    codes: ['rate_limited', 'weak_password', 'invalid_code', 'code_expired', 'invalid_token', 'user_disabled', 'invalid_request'],
    fieldOf: { weak_password: 'new_password', invalid_code: 'code', code_expired: 'code' },
    keys: { invalid_token: 'magic.invalid' },
  });
}

const EMAIL = /^[^\s@]+@[^\s@]+$/;

/** The app of the authorization request in flight, on its own pages (named in the mail; the hosted pages never bind a link to it). */
async function mailingApp(request: FastifyRequest): Promise<{ id: string; name: string } | undefined> {
  const flow = await shownFlowApp(request);
  return flow ? { id: flow.id, name: flow.name } : undefined;
}
const cleanEmail = (value: string) => value.trim().slice(0, 254);

/** The email field's own check, before anything is sent. */
function emailProblem(t: Translate, email: string): FormState | undefined {
  if (EMAIL.test(email)) return undefined;
  return formState({ fields: { email: t(email ? 'form.error.email_invalid' : 'form.error.email_missing') } });
}

export default async function authMailPages(app: FastifyInstance) {
  const ctxOf = (request: FastifyRequest) => requestContext(request);

  // Magic link: request -----------------------------------------------------------------------------

  async function renderMagic(request: FastifyRequest, reply: FastifyReply, locals: { mode: 'request' | 'sent' | 'landing' | 'code'; email?: string; token?: string; form?: FormState }) {
    const session = await app.browserSessions.ensure(request, reply);
    const carried = carriedQuery(request);
    return renderPage(request, reply, 'magic-link', {
      titleKey: 'magic.title',
      csrf: session.csrf_token,
      appName: (await shownFlowApp(request))?.name,
      requestAction: `/magic-link/request${carried}`,
      useAction: `/magic-link${carried}`,
      loginHref: `/login${carried}`,
      ...locals,
    });
  }

  app.get('/magic-link/request', async (request, reply) => renderMagic(request, reply, { mode: 'request' }));

  app.post('/magic-link/request', async (request, reply) => {
    const email = cleanEmail(field(request.body, 'email'));
    try {
      await app.throttle.hitIp(request);
      const problem = emailProblem(app.messages.translator(localeOf(request)), email);
      if (problem) return renderMagic(request, reply.code(400), { mode: 'request', email, form: problem });
      // The link goes to this page (never bound to an app); the mail names the app being signed in to, if any.
      await app.accounts.requestMagicLink({ email, locale: localeOf(request), app: await mailingApp(request) }, ctxOf(request));
    } catch (error) {
      return renderMagic(request, reply, { mode: 'request', email, form: mailFormFailure(request, reply, error) });
    }
    return renderMagic(request, reply, { mode: 'sent', email });
  });

  // Magic link: landing (GET never consumes) ----------------------------------------------------------

  app.get('/magic-link', async (request, reply) => {
    const token = (request.query as Record<string, unknown> | undefined)?.token;
    if (typeof token === 'string' && token.length > 0 && token.length <= 200) return renderMagic(request, reply, { mode: 'landing', token });
    return renderMagic(request, reply, { mode: 'code' });
  });

  app.post('/magic-link', async (request, reply) => {
    const token = field(request.body, 'token');
    const email = cleanEmail(field(request.body, 'email'));
    const code = field(request.body, 'code').trim();
    try {
      await app.throttle.hitIp(request);
      let user;
      if (token) user = await app.accounts.consumeMagicToken(token.slice(0, 200), ctxOf(request));
      else if (email && code) user = await app.accounts.consumeMagicCode({ email, code: code.slice(0, 20) }, ctxOf(request));
      else {
        const t = app.messages.translator(localeOf(request));
        const form = formState({ fields: { email: email ? undefined : t('form.error.email_missing'), code: code ? undefined : t('form.error.code_missing') } });
        return renderMagic(request, reply.code(400), { mode: 'code', email, form });
      }
      return await completeBrowserSignIn(request, reply, user, FIRST_FACTOR.magicLink, 'hosted_magic_link');
    } catch (error) {
      return renderMagic(request, reply, { mode: token ? 'request' : 'code', email, form: mailFormFailure(request, reply, error) });
    }
  });

  // Password forgot / reset ----------------------------------------------------------------------------

  async function renderForgot(request: FastifyRequest, reply: FastifyReply, locals: { sent?: boolean; email?: string; form?: FormState }) {
    const session = await app.browserSessions.ensure(request, reply);
    return renderPage(request, reply, 'password-forgot', { titleKey: 'forgot.title', csrf: session.csrf_token, appName: (await shownFlowApp(request))?.name, formAction: `/password/forgot${carriedQuery(request)}`, loginHref: `/login${carriedQuery(request)}`, ...locals });
  }

  app.get('/password/forgot', async (request, reply) => renderForgot(request, reply, {}));

  app.post('/password/forgot', async (request, reply) => {
    const email = cleanEmail(field(request.body, 'email'));
    try {
      await app.throttle.hitIp(request);
      const problem = emailProblem(app.messages.translator(localeOf(request)), email);
      if (problem) return renderForgot(request, reply.code(400), { email, form: problem });
      await app.accounts.requestPasswordReset({ email, locale: localeOf(request), app: await mailingApp(request) }, ctxOf(request));
    } catch (error) {
      return renderForgot(request, reply, { email, form: mailFormFailure(request, reply, error) });
    }
    return renderForgot(request, reply, { sent: true });
  });

  async function renderReset(request: FastifyRequest, reply: FastifyReply, locals: { token?: string; done?: boolean; invalid?: boolean; form?: FormState; passwordRules?: PasswordRules }) {
    const session = await app.browserSessions.ensure(request, reply);
    return renderPage(request, reply, 'password-reset', { titleKey: locals.done ? 'reset.done_title' : 'reset.title', csrf: session.csrf_token, formAction: `/password/reset${carriedQuery(request)}`, loginHref: `/login${carriedQuery(request)}`, ...locals });
  }

  /** The app a live link was asked through and the rules of its policy (shown before the person types); undefined for a dead token. */
  async function resetTerms(token: string): Promise<{ appId: string | undefined; passwordRules: PasswordRules } | undefined> {
    const reset = await app.accounts.hostedReset(token);
    return reset && { appId: reset.appId, passwordRules: passwordRulesOf(reset.policy, app.config.passwordMinLength) };
  }

  app.get('/password/reset', async (request, reply) => {
    const token = (request.query as Record<string, unknown> | undefined)?.token;
    const terms = typeof token === 'string' && token.length <= 200 ? await resetTerms(token) : undefined;
    if (typeof token !== 'string' || !terms) return renderReset(request, reply.code(400), { invalid: true });
    return renderReset(request, reply, { token, passwordRules: terms.passwordRules });
  });

  app.post('/password/reset', async (request, reply) => {
    const token = field(request.body, 'token').slice(0, 200);
    const password = field(request.body, 'new_password');
    let passwordRules: PasswordRules | undefined;
    try {
      await app.throttle.hitIp(request);
      const terms = await resetTerms(token);
      if (!terms) return renderReset(request, reply.code(400), { invalid: true });
      passwordRules = terms.passwordRules;
      if (password.length > 256) return renderReset(request, reply.code(400), { token, passwordRules, form: formState({ fields: { new_password: app.messages.translator(localeOf(request))('form.error.password_too_long') } }) });
      await app.accounts.resetPassword({ token, password, locale: localeOf(request) }, { ...ctxOf(request), appId: terms.appId });
    } catch (error) {
      if (isAppError(error) && error.code === 'invalid_token') return renderReset(request, reply.code(400), { invalid: true });
      return renderReset(request, reply, { token, passwordRules, form: mailFormFailure(request, reply, error, passwordRules) });
    }
    // The reset revoked every session of the user, this browser's included (it never signs in).
    return renderReset(request, reply, { done: true });
  });

  // Verify email -------------------------------------------------------------------------------------

  async function renderVerify(request: FastifyRequest, reply: FastifyReply, locals: { notice?: string; form?: FormState; done?: boolean; linkToken?: string; linkInvalid?: boolean }) {
    const session = await app.browserSessions.ensure(request, reply);
    const user = session.user_id ? await findUserById(app.db, session.user_id) : undefined;
    return renderPage(request, reply, 'verify-email', {
      titleKey: 'verify.title',
      csrf: session.csrf_token,
      formAction: `/verify-email${carriedQuery(request)}`,
      email: user?.email,
      verified: user?.email_verified === 1,
      signedIn: Boolean(user),
      // Where "not now" goes: on with the sign-in under way, else the account page.
      continueHref: resumeOf(request) ?? '/account',
      justRegistered: (request.query as Record<string, unknown>).after === 'register',
      ...locals,
    });
  }

  // The mailed link lands here and changes nothing (mail scanners open links); its button confirms.
  app.get('/verify-email', async (request, reply) => {
    const token = (request.query as Record<string, unknown>).token;
    return renderVerify(request, reply, typeof token === 'string' ? { linkToken: token.slice(0, 100) } : {});
  });

  app.post('/verify-email', async (request, reply) => {
    const userId = request.browserSession?.user_id;
    if (!userId) return renderVerify(request, reply.code(401), {});
    const t = app.messages.translator(localeOf(request));
    try {
      await app.throttle.hitIp(request);
      if (field(request.body, 'action') === 'confirm_link') {
        const token = field(request.body, 'token').slice(0, 100);
        try {
          await app.accounts.verifyEmailByLink(userId, token, ctxOf(request));
        } catch (error) {
          if (isAppError(error) && error.code === 'invalid_token') return renderVerify(request, reply.code(400), { linkInvalid: true });
          throw error;
        }
        return afterVerified(request, reply);
      }
      if (field(request.body, 'action') === 'send_code') {
        await app.accounts.requestEmailVerification(userId, { locale: localeOf(request) }, ctxOf(request));
        const user = await findUserById(app.db, userId);
        return renderVerify(request, reply, { notice: t('verify.sent', { email: user?.email ?? '' }) });
      }
      await app.accounts.confirmEmailVerification(userId, field(request.body, 'code').trim().slice(0, 20), ctxOf(request));
    } catch (error) {
      return renderVerify(request, reply, { form: mailFormFailure(request, reply, error) });
    }
    return afterVerified(request, reply);
  });

  /** A verified address goes on with the sign-in that asked for it, if any. */
  function afterVerified(request: FastifyRequest, reply: FastifyReply) {
    const resume = resumeOf(request);
    return resume ? reply.redirect(resume, 303) : renderVerify(request, reply, { done: true });
  }
}
