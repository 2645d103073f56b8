import type { FastifyInstance, FastifyRequest } from 'fastify';
import { z } from 'zod';
import { authoriseDeletion, countDeletionAttempt } from '../account-deletion/index.js';
import { isAppError } from '../errors.js';
import { sessionAuthentication } from '../plugins/browser-sessions.js';
import { formatDateTime } from '../plugins/i18n.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { localeOf, renderPage } from '../plugins/views.js';
import { requestContext } from '../shared/request-context.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { afterSignIn, deletionHoldOf, flowApp, readFlow } from './flow.js';
import { type FormState, formState } from './form-state.js';

/**
 * The hosted side of account deletion (docs/account/deletion.md):
 * - the "Delete account" section of `/account` (`accountDeletionSection`, views/partials/account-deletion.eta)
 *   and its form, `POST /account/deletion`: the current password (an account without one: a sign-in in
 *   the last 10 minutes), and with a second factor a code from the authenticator app or a recovery code
 *   (or a session that proved a factor in the last 15 minutes), and the confirmation box. Scheduling
 *   signs the person out everywhere, this browser included, then `/account/deletion/done` says when;
 * - `/account/deletion/scheduled`: a sign-in of an account whose deletion is scheduled stops there
 *   (pages/flow.ts `holdForDeletion`): "Keep my account" cancels the deletion and completes the sign-in;
 *   "Continue signing out" leaves the browser signed out and the deletion as it was.
 */

/** Refusals of the deletion form the section explains, by their message key (the account page's `deletion_error`). */
const ERROR_KEYS: Record<string, string> = {
  wrong_password: 'idp.error.wrong_current_password',
  reauth: 'deletion.reauth',
  reauth_mfa: 'deletion.reauth_mfa',
  invalid_code: 'deletion.reauth_mfa',
  rate_limited: 'deletion.rate_limited',
  confirm: 'deletion.confirm_required',
};

/** What the account page shows of the section (its locals `deletion`). */
export async function accountDeletionSection(app: FastifyInstance, request: FastifyRequest, user: UserRow, errorKey: string | undefined) {
  const enrolled = await app.mfa.enrolled(app.db, user.id);
  const tr = app.messages.translator(localeOf(request));
  const key = errorKey ? ERROR_KEYS[errorKey] : undefined;
  const error = key ? tr(key) : undefined;
  const fields: Record<string, string | undefined> = {};
  if (errorKey === 'wrong_password') fields.deletion_password = error;
  if (errorKey === 'invalid_code') fields.deletion_code = error;
  if (errorKey === 'confirm') fields.deletion_confirm = error;
  const form: FormState = formState({ fields });
  return {
    graceDays: app.accountDeletion.graceDays,
    // What is removed, naming passkeys only where this server offers them.
    removedKey: app.passkeys.enabled ? 'deletion.removed' : 'deletion.removed_no_passkeys',
    needsPassword: user.password_hash !== null,
    // A code is typed for an authenticator app or recovery codes; a passkey proves itself by the step-up.
    needsCode: enrolled.includes('totp') || enrolled.includes('recovery_code'),
    // A field-level message stands next to its field; the others above the form.
    error: Object.keys(form.fields).length > 0 ? undefined : error,
    form,
  };
}

const DeletionForm = z.object({
  csrf: z.string().optional(),
  action: z.literal('delete'),
  deletion_password: z.string().max(1024).optional(),
  deletion_code: z.string().max(64).optional(),
  deletion_confirm: z.string().max(4).optional(),
  ui_locales: z.string().max(100).optional(),
});

const HoldForm = z.object({ csrf: z.string().optional(), action: z.enum(['keep', 'leave']), ui_locales: z.string().max(100).optional() });

const DoneQuery = z.object({ at: z.string().max(40).optional(), ui_locales: z.string().max(100).optional() });

export default async function accountDeletionPages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();

  const back = (why: string) => `/account?deletion_error=${why}#delete-account`;

  app.post('/account/deletion', { schema: { body: DeletionForm } }, async (request, reply) => {
    const id = request.browserSession?.user_id;
    const user = id ? await findUserById(app.db, id) : undefined;
    if (!user || user.status !== 'active') return reply.redirect('/account', 303);
    const form = request.body;
    if (form.deletion_confirm !== '1') return reply.redirect(back('confirm'), 303);
    const ctx = { ...requestContext(request), appId: null, locale: localeOf(request) };
    try {
      await app.throttle.hitIp(request);
      await countDeletionAttempt(app, user.id);
      await authoriseDeletion(app, user, { password: form.deletion_password, code: form.deletion_code }, { kind: 'page', ...sessionAuthentication(request.browserSession!) }, ctx);
    } catch (error) {
      if (!isAppError(error)) throw error;
      if (error.code === 'invalid_credentials') return reply.redirect(back('wrong_password'), 303);
      if (error.code === 'invalid_code') return reply.redirect(back('invalid_code'), 303);
      if (error.code === 'rate_limited') return reply.redirect(back('rate_limited'), 303);
      if (error.code === 'forbidden' && error.details?.[0]?.path === 'reauth') {
        return reply.redirect(back(error.details[0].message === 'needs_fresh_sign_in' ? 'reauth' : 'reauth_mfa'), 303);
      }
      throw error;
    }
    const result = await app.accountDeletion.schedule(user, 'account', ctx);
    // Every session of the account is revoked; this browser forgets its cookie too.
    await app.browserSessions.signOut(request, reply);
    return reply.redirect(result.deleted ? '/account/deletion/done' : `/account/deletion/done?at=${result.scheduledAt}`, 303);
  });

  app.get('/account/deletion/done', { schema: { querystring: DoneQuery } }, async (request, reply) => {
    await app.browserSessions.ensure(request, reply);
    // Only a date to show the person who just asked (never looked up): an instant, or nothing.
    const at = request.query.at && /^\d{9,11}$/.test(request.query.at) ? Number(request.query.at) : undefined;
    return renderPage(request, reply, 'deletion-done', {
      titleKey: 'deletion.title',
      when: at === undefined ? undefined : formatDateTime(localeOf(request), at),
    });
  });

  app.get('/account/deletion/scheduled', async (request, reply) => {
    reply.header('cache-control', 'no-store');
    const session = await app.browserSessions.ensure(request, reply);
    const hold = deletionHoldOf(request);
    const user = hold && (await findUserById(app.db, hold.userId));
    if (!hold || !user || user.deletion_scheduled_at === null) return reply.redirect('/account', 303);
    return renderPage(request, reply, 'deletion-scheduled', {
      titleKey: 'deletion.pending.title',
      csrf: session.csrf_token,
      when: formatDateTime(localeOf(request), user.deletion_scheduled_at),
    });
  });

  app.post('/account/deletion/scheduled', { schema: { body: HoldForm } }, async (request, reply) => {
    reply.header('cache-control', 'no-store');
    const hold = deletionHoldOf(request);
    const user = hold && (await findUserById(app.db, hold.userId));
    if (!hold || !user) return reply.redirect('/account', 303);
    await app.browserSessions.writeData(request, reply, { ...readFlow(request), deletionHold: undefined });
    if (request.body.action === 'leave') {
      const session = await app.browserSessions.ensure(request, reply);
      return renderPage(request, reply, 'deletion-scheduled', {
        titleKey: 'deletion.pending.title',
        csrf: session.csrf_token,
        left: true,
        when: user.deletion_scheduled_at === null ? '' : formatDateTime(localeOf(request), user.deletion_scheduled_at),
      });
    }
    const ctx = requestContext(request);
    await app.accountDeletion.cancel(user.id, 'sign_in', ctx);
    await app.browserSessions.signIn(request, reply, user.id, hold.amr);
    const client = await flowApp(request);
    await app.signIn.recordLogin(app.db, { userId: user.id, appId: client?.id ?? null, method: hold.method, amr: hold.amr, via: hold.via }, ctx);
    return afterSignIn(request, reply, hold.returnTo);
  });
}
