import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, isAppError } from '../errors.js';
import { pickLocale, type Locale } from '../plugins/i18n.js';
import { corsOnSend, headerClientId } from '../plugins/cors.js';
import { authenticateAtApp } from '../sign-in/requesting-app.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { parseAmr, type Amr } from '../shared/acr.js';
import { type RequestContext, requestContext } from '../shared/request-context.js';
import { json, shareRouteDocs } from '../shared/responses.js';
import { findGrant } from '../storage/repos/grants.js';
import { toPublicUser, type UserRow } from '../storage/repos/users.js';
import { ChangeBody, ChangePending, ConfirmBody, EmailChanged } from './schemas.js';
import { EmailChange } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { EMAIL_CHANGE_TTL, type EmailChange } from './service.js';

/**
 * Email change (docs/account/email-change.md). Two doors, one pending change per account and one
 * limit: `POST /v1/auth/email/change` and `/v1/auth/email/change/confirm` with the person's access
 * token from an app, and the "Email address" section of the hosted account page (src/pages/account.ts,
 * which also takes the mailed link, `/account/email/confirm`).
 */

/** How recent the sign-in of an account without a password must be to change the address. */
export const EMAIL_CHANGE_FRESH_SECONDS = 10 * 60;

/**
 * May this signed-in person move the account to another address now? An address is the way back into
 * an account (password reset, magic links), so a stolen token or an unattended browser must not be
 * enough: an account with a password must type it again (wrong → invalid_credentials); one without a
 * password needs a sign-in within EMAIL_CHANGE_FRESH_SECONDS; and an account with a second factor needs
 * a sign-in that proved it recently, as for changing factors (Mfa.changeRefusal). Refusals other than
 * the password's → 403 `forbidden` (details[0].path `reauth`).
 */
export async function authoriseEmailChange(
  app: FastifyInstance,
  user: UserRow,
  password: string | undefined,
  session: { amr: readonly Amr[]; authTime: number | null },
  ctx: RequestContext,
): Promise<void> {
  const authTime = session.authTime ?? 0;
  if (user.password_hash) await app.accounts.checkCurrentPassword(user, password ?? '', ctx);
  else if (app.clock.now() - authTime > EMAIL_CHANGE_FRESH_SECONDS) {
    throw new AppError('forbidden', { message: 'Sign in again to change your email address.', details: [{ path: 'reauth', message: 'needs_fresh_sign_in' }], detail: 'email change: stale sign-in' });
  }
  const refusal = await app.mfa.changeRefusal(user, 'change', { amr: session.amr, authTime });
  if (refusal) {
    throw new AppError('forbidden', { message: 'Verify with your second factor again to change your email address.', details: [{ path: 'reauth', message: refusal }], detail: `email change: ${refusal}` });
  }
}

declare module 'fastify' {
  interface FastifyInstance {
    emailChange: EmailChange;
  }
}

/** The service, for both doors. */
export const emailChangePlugin = fp(
  async (app: FastifyInstance) => {
    const reserveCodeTry = (address: string, now: number) => app.accounts.reserveCodeTry(address, now);
    app.decorate('emailChange', new EmailChange(app.db, app.config, app.clock, app.throttle, app.mailer, reserveCodeTry));
  },
  { name: 'email-change', dependencies: ['db', 'throttle', 'mailer', 'accounts'] },
);

const mailLocale = (acceptLanguage: string | undefined): Locale => pickLocale(undefined, acceptLanguage);

/** `POST /v1/auth/email/change[/confirm]` (registered under the prefix `/v1/auth/email`). */
export default async function emailChangeRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // CORS for single-page apps: the token's app once authenticated (preflights: /v1/auth's OPTIONS route).
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'none' }));
  app.addHook('onRequest', async (request) => {
    if (request.method === 'POST') await app.throttle.hitIp(request);
  });
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, {
      tags: ['auth'],
      security: [{ accessToken: [] }],
      errors: { 400: ['invalid_request'], 401: ['unauthorized'], 403: ['forbidden', 'feature_disabled'], 429: ['rate_limited'] },
    }),
  );


  app.post(
    '/change',
    {
      schema: {
        operationId: 'requestEmailChange',
        summary: 'Ask to move the account to another email address',
        description:
          "With the person's access token from this app and the account's current password (an account without a password changes its address on the account page only), " +
          'and for an account with a second factor a sign-in that proved it in the last 15 minutes (else 403 `forbidden`). ' +
          'A 6-digit code and a link are mailed to the new address (valid 20 minutes; a newer request replaces the pending one). ' +
          'The answer is the same whether or not the new address belongs to another account. At most MAIL_PER_HOUR requests per account and per new address in any hour.',
        body: ChangeBody,
        response: { 202: json('The change is pending: the code is on its way to the new address.', ChangePending) },
        examples: { request: { summary: 'Ask for a change', body: { email: 'ada@new.example', password: 'correct horse battery staple' }, status: 202, response: { status: 'pending', expires_in: 1200 } } },
      },
    },
    async (request, reply) => {
      const identity = await authenticateAtApp(app.tokens, request);
      await app.emailChange.countRequest(identity.userId);
      const [user, grant] = await Promise.all([app.emailChange.activeUser(identity.userId), findGrant(app.db, identity.grantId)]);
      if (!grant) throw new AppError('unauthorized', { detail: 'grant gone' });
      const ctx = { ...requestContext(request), appId: identity.appId, locale: mailLocale(request.headers['accept-language']) };
      app.emailChange.checkNewAddress(user, request.body.email);
      // The address opens the account at every app (reset and sign-in links), and an app may act for the
      // person at that app only (docs/security/credentials.md): over REST the change needs the current
      // password, a secret the app does not hold by itself. An account without one uses the account page.
      if (!user.password_hash) {
        throw new AppError('forbidden', {
          message: 'This account has no password: change the email address on the account page.',
          details: [{ path: 'reauth', message: 'use_account_page' }],
          detail: 'email change over REST without a password',
        });
      }
      try {
        await authoriseEmailChange(app, user, request.body.password, { amr: parseAmr(grant.amr), authTime: grant.auth_time }, ctx);
      } catch (error) {
        // A wrong current password from a signed-in person is a refused re-authentication, not a bad token.
        if (isAppError(error) && error.code === 'invalid_credentials') {
          throw new AppError('forbidden', { message: 'The current password is incorrect.', details: [{ path: 'password', message: 'is incorrect' }], detail: 'email change: wrong password' });
        }
        throw error;
      }
      const { expiresIn } = await app.emailChange.request(user, request.body.email, ctx);
      return reply.header('cache-control', 'no-store').code(202).send({ status: 'pending', expires_in: expiresIn });
    },
  );

  app.post(
    '/change/confirm',
    {
      schema: {
        operationId: 'confirmEmailChange',
        summary: 'Confirm the email change with the mailed code',
        description:
          'The code from the mail to the new address (CODE_MAX_ATTEMPTS wrong answers use the change up). The account moves to the new address, marked verified; ' +
          'the old address is sent a notice. 409 `email_taken` when the address was taken by another account in the meantime.',
        body: ConfirmBody,
        response: { 200: json('The account now has the new address.', EmailChanged) },
        errors: { 400: ['invalid_code', 'code_expired'], 409: ['email_taken'] },
        examples: {
          wrongCode: { summary: 'A wrong code', body: { code: '000000' }, status: 400, response: { code: 'invalid_code', message: 'The code is incorrect.', attempts_left: 4 } },
        },
      },
    },
    async (request, reply) => {
      const identity = await authenticateAtApp(app.tokens, request);
      const ctx = { ...requestContext(request), appId: identity.appId, locale: mailLocale(request.headers['accept-language']) };
      const user = await app.emailChange.confirmByCode(identity.userId, request.body.code.trim(), ctx);
      return reply.header('cache-control', 'no-store').send({ user: toPublicUser(user) });
    },
  );
}
