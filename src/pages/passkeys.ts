import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { z, type ZodType } from 'zod';
import { AppError, isAppError } from '../errors.js';
import { AuthenticationResponse, BROWSER_BUNDLE_VERSION, RegistrationResponse } from '../passkeys/index.js';
import { sessionAuthentication } from '../plugins/browser-sessions.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { localeOf, renderPage } from '../plugins/views.js';
import { requestContext } from '../shared/request-context.js';
import { findApp } from '../storage/repos/apps.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { accountMfaError, completeBrowserSignIn, showRecoveryCodes } from './flow.js';

/**
 * Passkeys on the hosted pages (issue 16): `/account` lists, adds, renames and removes them;
 * `/login` signs in with one. Both need JavaScript (WebAuthn is a browser API): the page script
 * (views/assets/passkeys.js) asks for options, runs the ceremony, puts the answer in the form's
 * `response` field and submits the form here. Without JavaScript, or while passkeys are off, the pages
 * offer no passkey buttons; renaming and removing work without JavaScript.
 */

/** The page scripts, in order: the WebAuthn library (its version in the URL: it is cached for a year), then ours. */
export const PASSKEY_SCRIPTS = [`/assets/simplewebauthn.js?v=${BROWSER_BUNDLE_VERSION}`, '/assets/passkeys.js'];

/** What `/account` shows of passkeys (undefined while they are off): each one, with the app it signs in at only. */
export async function accountPasskeys(app: FastifyInstance, userId: string) {
  if (!app.passkeys.enabled) return undefined;
  const items = await app.passkeys.list(userId);
  const appIds = [...new Set(items.flatMap((p) => (p.appId ? [p.appId] : [])))];
  const names = new Map(await Promise.all(appIds.map(async (id) => [id, (await findApp(app.db, id))?.name ?? id] as const)));
  return { scripts: PASSKEY_SCRIPTS, items: items.map((p) => ({ ...p, appName: p.appId ? names.get(p.appId) : undefined })) };
}

/** A form that asks the page script for a passkey (views/partials/passkey-get.eta) and posts its answer to `action`. */
export function passkeyGetForm(action: string, options: string, label: string, autofill = false) {
  return { scripts: PASSKEY_SCRIPTS, action, options, label, autofill };
}

/** What `/login` shows of passkeys (undefined while they are off); `carried` = the query kept between pages. */
export function loginPasskeys(app: FastifyInstance, carried: string) {
  return app.passkeys.enabled ? passkeyGetForm(`/login/passkey${carried}`, '/login/passkey/options', 'passkey.login.button', true) : undefined;
}

const Form = z.object({
  csrf: z.string().optional(),
  action: z.string().max(20).optional(),
  passkey_id: z.string().max(100).optional(),
  name: z.string().max(400).optional(),
  response: z.string().max(48_000).optional(),
});

/** The ceremony answer the page script put in the `response` field, checked against its schema. */
export function ceremonyAnswer<T extends ZodType>(schema: T, value: string | undefined): z.output<T> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(value ?? '');
  } catch {
    throw new AppError('invalid_request', { details: [{ path: 'response', message: 'must be the JSON answer of the passkey ceremony' }] });
  }
  const result = schema.safeParse(parsed);
  if (!result.success) throw new AppError('invalid_request', { details: [{ path: 'response', message: 'is not a passkey answer' }], detail: result.error.message });
  return result.data;
}

export default async function passkeyPages(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();

  /** A refused passkey form: the error page, with the status of the error and a message in the page's language. */
  function refused(request: FastifyRequest, reply: FastifyReply, error: unknown) {
    if (!isAppError(error) || error.status >= 500) throw error;
    const t = app.messages.translator(localeOf(request));
    const key = error.messageKey ?? `passkey.error.${error.code}`;
    const message = t(key) === key ? error.publicMessage : t(key);
    if (error.code === 'rate_limited' && typeof error.extra?.retry_after === 'number') reply.header('retry-after', String(error.extra.retry_after));
    return renderPage(request, reply.code(error.status), 'error', { titleKey: 'passkey.error.title', code: error.code, message });
  }

  async function signedInUser(request: FastifyRequest): Promise<UserRow> {
    const id = request.browserSession?.user_id;
    const user = id ? await findUserById(app.db, id) : undefined;
    if (!user || user.status !== 'active') throw new AppError('unauthorized', { message: 'Sign in on the account page first.' });
    return user;
  }

  app.post('/account/passkeys', { schema: { body: Form } }, async (request, reply) => {
    const form = request.body;
    try {
      const user = await signedInUser(request);
      const ctx = requestContext(request);
      if (form.action === 'add_passkey') app.passkeys.assertEnabled();
      // Adding or removing a factor needs a fresh second factor once the account has one, and adding a proven address (Mfa.changeRefusal).
      if (form.action === 'add_passkey' || form.action === 'remove_passkey') {
        const refusal = await app.mfa.changeRefusal(user, form.action === 'add_passkey' ? 'add' : 'change', sessionAuthentication(request.browserSession!));
        if (refusal) return reply.redirect(`/account?mfa_error=${accountMfaError(refusal, false)}#mfa`, 303);
      }
      if (form.action === 'add_passkey') {
        await app.throttle.hitIp(request);
        const response = ceremonyAnswer(RegistrationResponse, form.response);
        const { recoveryCodes } = await app.passkeys.verifyRegistration(
          { userId: user.id, binding: `session:${request.browserSession!.id_hash}`, response, name: form.name, appId: null, via: 'account' },
          ctx,
        );
        if (recoveryCodes) return showRecoveryCodes(request, reply, recoveryCodes, '/account#passkeys');
      } else if (form.action === 'rename_passkey' && form.passkey_id) {
        await app.passkeys.rename(user.id, form.passkey_id, form.name ?? '');
      } else if (form.action === 'remove_passkey' && form.passkey_id) {
        await app.passkeys.remove(user.id, form.passkey_id, { via: 'account' }, ctx);
      } else {
        throw new AppError('invalid_request', { detail: 'unknown passkey action' });
      }
    } catch (error) {
      return refused(request, reply, error);
    }
    return reply.redirect('/account#passkeys', 303);
  });

  app.post('/login/passkey', { schema: { body: Form } }, async (request, reply) => {
    const form = request.body;
    try {
      if (form.action !== 'passkey') throw new AppError('invalid_request', { detail: 'unknown passkey sign-in action' });
      app.passkeys.assertEnabled();
      await app.throttle.hitIp(request);
      const response = ceremonyAnswer(AuthenticationResponse, form.response);
      // The CSRF check of the pages scope has made sure there is a browser session.
      // Gatehouse's own page: only an account-wide passkey (one an app registered signs in only at that app).
      const verified = await app.passkeys.verifyAuthentication({ response, binding: `session:${request.browserSession!.id_hash}`, appId: null });
      const user = await findUserById(app.db, verified.userId);
      if (!user) throw new AppError('invalid_credentials', { message: 'The passkey could not be verified.', detail: 'user of the passkey gone' });
      if (user.status !== 'active') throw new AppError('user_disabled');
      return await completeBrowserSignIn(request, reply, user, { method: 'passkey', amr: verified.amr }, 'hosted_login');
    } catch (error) {
      return refused(request, reply, error);
    }
  });
}
