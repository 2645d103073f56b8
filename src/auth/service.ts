import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import type { TokenResponse } from '../plugins/tokens.js';
import { isValidBirthdate, missingRequiredFields } from '../shared/required-fields.js';
import { type App, findApp, type RequiredField } from '../storage/repos/apps.js';
import { findAppUser, recordAppSignIn } from '../storage/repos/app-users.js';
import { findConsentedScope, grantConsent } from '../storage/repos/consents.js';
import { appendEvent } from '../storage/repos/events.js';
import { findGrant } from '../storage/repos/grants.js';
import { findUserById, type PublicUser, toPublicUser, updateUser, type UserRow } from '../storage/repos/users.js';
import { DEFAULT_SCOPE as DEFAULT_SIGN_IN_SCOPE, isSubsetScope } from '../shared/scopes.js';
import type { AccountContext } from '../plugins/accounts.js';

/** The sign-in result of CONTRACT §5, shared by register, login, magic-link verify and profile complete. */
export type SignInResult =
  | ({ status: 'ok'; user: PublicUser } & TokenResponse)
  | { status: 'pending'; next_step: 'profile' | 'verify_email'; session: string; required_fields: RequiredField[] };

/**
 * The app a `/v1/auth` request names, by `client_id` in the body or `X-Client-Id` (they must agree):
 * missing → 400 invalid_request; unknown or disabled → 401 invalid_client; no Auth feature → 403 feature_disabled.
 */
export async function resolveApp(app: FastifyInstance, request: FastifyRequest, bodyClientId: string | undefined): Promise<App> {
  const header = request.headers['x-client-id'];
  const headerId = typeof header === 'string' && header.length > 0 ? header : undefined;
  if (headerId && bodyClientId && headerId !== bodyClientId) {
    throw new AppError('invalid_request', { details: [{ path: 'client_id', message: 'differs from X-Client-Id' }] });
  }
  const clientId = bodyClientId ?? headerId;
  if (!clientId) throw new AppError('invalid_request', { details: [{ path: 'client_id', message: 'client_id or X-Client-Id is required' }] });
  const client = await findApp(app.db, clientId);
  if (!client || client.disabled) throw new AppError('invalid_client', { detail: 'unknown or disabled app' });
  if (!client.features.auth) throw new AppError('feature_disabled', { detail: 'app lacks the Auth feature' });
  return client;
}

/** An exact whitelist match, or 400 invalid_redirect_uri. */
export function checkRedirectUri(client: App, redirectUri: string | undefined): string | undefined {
  if (redirectUri === undefined) return undefined;
  if (!client.redirectUris.includes(redirectUri)) throw new AppError('invalid_redirect_uri');
  return redirectUri;
}

/**
 * Completes a sign-in of `user` to `client` (CONTRACT §5, §14.6, §14.11): a user blocked for the app →
 * 403 user_blocked; the app's required data missing → `pending` with a session JWT on a new (or the
 * given) grant; otherwise, in one transaction: app user recorded, consent for the default scopes,
 * `user.login_succeeded`, tokens issued on the grant.
 */
export async function completeSignIn(
  app: FastifyInstance,
  client: App,
  user: UserRow,
  ctx: AccountContext,
  options: { method: string; grantId?: string; authTime?: number },
): Promise<SignInResult> {
  if (user.status !== 'active') throw new AppError('user_disabled');
  const membership = await findAppUser(app.db, client.id, user.id);
  if (membership?.status === 'blocked') throw new AppError('user_blocked');
  const now = app.clock.now();
  const authTime = options.authTime ?? now;
  const missing = missingRequiredFields(client.requiredFields, user);
  if (missing.length > 0) {
    const grantId =
      options.grantId ?? (await app.tokens.createGrant(app.db, { appId: client.id, userId: user.id, scope: DEFAULT_SIGN_IN_SCOPE, authTime }));
    const session = await app.tokens.mintSession({ userId: user.id, appId: client.id, grantId });
    return {
      status: 'pending',
      next_step: missing.some((f) => f !== 'email_verified') ? 'profile' : 'verify_email',
      session,
      required_fields: missing,
    };
  }
  const response = await app.db.transaction().execute(async (trx) => {
    await recordAppSignIn(trx, client.id, user.id, now);
    const consented = await findConsentedScope(trx, client.id, user.id);
    if (!isSubsetScope(DEFAULT_SIGN_IN_SCOPE, consented)) {
      await grantConsent(trx, client.id, user.id, DEFAULT_SIGN_IN_SCOPE, now);
      await appendEvent(trx, now, { type: 'consent.granted', appId: client.id, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { scope: DEFAULT_SIGN_IN_SCOPE, via: 'sign_in' } });
    }
    await appendEvent(trx, now, { type: 'user.login_succeeded', appId: client.id, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { method: options.method } });
    const issued = await app.tokens.issueTokens(trx, { app: client, user, scope: DEFAULT_SIGN_IN_SCOPE, authTime, grantId: options.grantId });
    return issued.response;
  });
  return { status: 'ok', user: toPublicUser(user), ...response };
}

/**
 * `POST /v1/auth/profile/complete`: the session JWT of a pending sign-in plus the missing data; answers
 * the sign-in result on the same grant (still `pending` while something is missing).
 */
export async function completeProfile(
  app: FastifyInstance,
  request: FastifyRequest,
  input: { session: string; client_id?: string; data: { name?: string; phone_number?: string; birthdate?: string } },
  ctx: AccountContext,
): Promise<SignInResult> {
  const header = request.headers['x-client-id'];
  const named = input.client_id ?? (typeof header === 'string' && header ? header : undefined);
  const claims = await app.tokens.verifySession(input.session, named);
  const client = await resolveApp(app, request, claims.appId);
  const grant = await findGrant(app.db, claims.grantId);
  const user = await findUserById(app.db, claims.sub);
  if (!grant || !user) throw new AppError('invalid_token', { detail: 'grant or user gone' });
  const { data } = input;
  if (data.birthdate !== undefined && !isValidBirthdate(data.birthdate)) {
    throw new AppError('invalid_request', { details: [{ path: 'data.birthdate', message: 'must be a past date YYYY-MM-DD' }] });
  }
  const patch: Partial<UserRow> = {};
  if (data.name !== undefined) patch.name = data.name;
  if (data.phone_number !== undefined) patch.phone_number = data.phone_number;
  if (data.birthdate !== undefined) patch.birthdate = data.birthdate;
  let current = user;
  if (Object.keys(patch).length > 0) {
    const now = app.clock.now();
    await app.db.transaction().execute(async (trx) => {
      await updateUser(trx, user.id, { ...patch, updated_at: now });
      await appendEvent(trx, now, { type: 'profile.updated', appId: client.id, userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { fields: Object.keys(patch), via: 'profile_complete' } });
    });
    current = (await findUserById(app.db, user.id))!;
  }
  return completeSignIn(app, client, current, { ...ctx, appId: client.id }, { method: 'profile_complete', grantId: grant.id, authTime: grant.auth_time });
}
