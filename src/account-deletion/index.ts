import type { FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AppError, isAppError } from '../errors.js';
import { pickLocale } from '../plugins/i18n.js';
import { corsOnSend, headerClientId } from '../plugins/cors.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import type { Amr } from '../shared/acr.js';
import { requestContext, type RequestContext } from '../shared/request-context.js';
import { json, shareRouteDocs } from '../shared/responses.js';
import { isoTime } from '../shared/time.js';
import { authenticateAtApp } from '../sign-in/requesting-app.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { DeleteAccountBody, DeletionScheduled } from './schemas.js';
import { AccountDeletion } from './service.js';

// The module's public face: what other modules may use (docs/architecture/modules.md).
export { AccountDeletion, type DeletionContext, type DeletionVia } from './service.js';
export { DeletionField } from './schemas.js';

/**
 * Account deletion (docs/account/deletion.md). Two doors that schedule it — `DELETE /v1/auth/account`
 * with the person's access token from an app, and the "Delete account" section of the hosted account
 * page (src/pages/account.ts) — and the ways to cancel it: signing in during the grace (the hosted
 * pages ask, REST `POST /v1/auth/login` takes `cancel_deletion`), and the admin API. The purge runs
 * from the maintenance loop (src/maintenance).
 */

/** How recent the sign-in of an account without a password must be to delete it on the account page. */
export const DELETION_FRESH_SECONDS = 10 * 60;

const HOUR = 3600;

declare module 'fastify' {
  interface FastifyInstance {
    accountDeletion: AccountDeletion;
  }
}

/** The service, for every door and the maintenance loop. */
export const accountDeletionPlugin = fp(
  async (app: FastifyInstance) => {
    app.decorate('accountDeletion', new AccountDeletion(app.db, app.config, app.clock, app.mailer));
  },
  { name: 'account-deletion', dependencies: ['db', 'mailer'] },
);

/**
 * Counts one deletion attempt of the account (both doors together, before any credential is checked,
 * so wrong passwords and codes are capped too): MAIL_PER_HOUR per hour; 429 over it.
 */
export async function countDeletionAttempt(app: FastifyInstance, userId: string): Promise<void> {
  await app.throttle.hitKey(`account_deletion:${userId}`, app.config.throttle.mailPerHour, HOUR);
}

/**
 * May this signed-in person delete the account now? A token some app holds, or an unattended browser,
 * must never be enough (docs/account/deletion.md):
 * - the current password, typed again (wrong → `invalid_credentials`, which both doors answer with 403);
 *   an account without one: over REST never (403 `forbidden`, details[0] `reauth`/`use_account_page`),
 *   on the account page a sign-in within DELETION_FRESH_SECONDS (else `needs_fresh_sign_in`);
 * - and when the account has a second factor: a code from the authenticator app or a recovery code in
 *   the request (wrong → 400 `invalid_code`, counted like every factor code). The account page also
 *   takes a session that proved a factor in the last 15 minutes (a passkey step-up), as for changing
 *   factors; over REST the code is required, whatever the token's `amr` says.
 * Refusals other than the password's and the code's → 403 `forbidden` (details[0].path `reauth`).
 */
export async function authoriseDeletion(
  app: FastifyInstance,
  user: UserRow,
  input: { password?: string; code?: string },
  door: { kind: 'api' } | { kind: 'page'; amr: readonly Amr[]; authTime: number },
  ctx: RequestContext,
): Promise<void> {
  if (user.password_hash) await app.accounts.checkCurrentPassword(user, input.password ?? '', ctx);
  else if (door.kind === 'api') throw reauth('use_account_page', 'This account has no password: delete it on the account page.');
  else if (app.clock.now() - door.authTime > DELETION_FRESH_SECONDS) throw reauth('needs_fresh_sign_in', 'Sign in again to delete your account.');
  const enrolled = await app.mfa.enrolled(app.db, user.id);
  if (enrolled.length === 0) return;
  const code = input.code?.trim();
  if (code) {
    await app.mfa.verifyCode(user.id, code, ctx);
    return;
  }
  if (door.kind === 'page' && (await app.mfa.changeRefusal(user, 'change', { amr: door.amr, authTime: door.authTime })) === null) return;
  throw reauth('needs_second_factor', 'Enter a code from your authenticator app or a recovery code to delete your account.');
}

/**
 * `POST /v1/auth/login` with `cancel_deletion` (docs/account/deletion.md): the password just checked keeps
 * the account — unless it has a second factor, which that request cannot ask before the keep: such an
 * account is kept on the hosted pages, after its factor (403 `forbidden`, `reauth`/`use_account_page`).
 */
export async function keepAtRestSignIn(app: FastifyInstance, user: UserRow, ctx: RequestContext & { appId: string }): Promise<void> {
  if ((await app.mfa.enrolled(app.db, user.id)).length > 0) {
    throw reauth('use_account_page', 'This account has a second factor: sign in on the account page to keep it.');
  }
  await app.accountDeletion.cancel(user.id, 'sign_in', ctx);
}

const reauth = (why: string, message: string) => new AppError('forbidden', { message, details: [{ path: 'reauth', message: why }], detail: `account deletion: ${why}` });

/** `DELETE /v1/auth/account` (registered under the prefix `/v1/auth/account`). */
export default async function accountDeletionRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  // CORS for single-page apps: the token's app once authenticated (preflights: /v1/auth's OPTIONS route).
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'none' }));
  app.addHook('onRequest', async (request) => {
    if (request.method === 'DELETE') await app.throttle.hitIp(request);
  });
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, {
      tags: ['auth'],
      security: [{ accessToken: [] }],
      errors: { 400: ['invalid_request', 'invalid_code'], 401: ['unauthorized'], 403: ['forbidden', 'feature_disabled'], 409: ['conflict'], 429: ['rate_limited'] },
    }),
  );

  app.delete(
    '/',
    {
      prefixTrailingSlash: 'no-slash',
      schema: {
        operationId: 'deleteAccount',
        summary: "Schedule the deletion of the signed-in person's account",
        description:
          "With the person's access token from this app AND the account's current password in the body (a token alone is never enough: an account without a password is deleted on the account page), " +
          'and for an account with a second factor a code from the authenticator app or a recovery code (`code`). ' +
          'Every session and token of the account is revoked at once (the person is signed out everywhere, this token included); the account and everything held about the person are purged ' +
          'ACCOUNT_DELETION_GRACE_DAYS (7) later, unless they sign in meanwhile and keep it (`POST /v1/auth/login` with `cancel_deletion`, or the hosted pages). ' +
          'A mail tells the address the date and how to keep the account. With a grace of 0 the account is purged before the answer (`status: deleted`). ' +
          'A wrong password → 403 `forbidden` (details[0].path `password`); a missing second factor → 403 `forbidden` (details[0].path `reauth`); a wrong code → 400 `invalid_code`. ' +
          'At most MAIL_PER_HOUR attempts per account in any hour.',
        body: DeleteAccountBody.nullish(),
        response: { 202: json('The deletion is scheduled (or done).', DeletionScheduled) },
        examples: {
          wrongPassword: {
            summary: 'A token with a wrong password: refused, nothing changes',
            body: { password: 'not the password' },
            status: 403,
            response: { code: 'forbidden', message: 'The current password is incorrect.', details: [{ path: 'password', message: 'is incorrect' }] },
          },
        },
      },
    },
    async (request, reply) => {
      const identity = await authenticateAtApp(app.tokens, request);
      const user = await findUserById(app.db, identity.userId);
      if (!user || user.status !== 'active') throw new AppError('unauthorized', { detail: 'user gone or disabled' });
      const ctx = { ...requestContext(request), appId: identity.appId, locale: pickLocale(undefined, request.headers['accept-language']) };
      await countDeletionAttempt(app, user.id);
      try {
        await authoriseDeletion(app, user, request.body ?? {}, { kind: 'api' }, ctx);
      } catch (error) {
        // A wrong current password from a signed-in person is a refused re-authentication, not a bad token.
        if (isAppError(error) && error.code === 'invalid_credentials') {
          throw new AppError('forbidden', { message: 'The current password is incorrect.', details: [{ path: 'password', message: 'is incorrect' }], detail: 'account deletion: wrong password' });
        }
        throw error;
      }
      const result = await app.accountDeletion.schedule(user, 'api', ctx);
      return reply
        .header('cache-control', 'no-store')
        .code(202)
        .send({ status: result.deleted ? 'deleted' : 'scheduled', deletion_scheduled_at: isoTime(result.scheduledAt) });
    },
  );
}
