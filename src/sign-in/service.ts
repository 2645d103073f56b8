import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import type { RequestContext } from '../shared/request-context.js';
import { DEFAULT_SCOPE, isSubsetScope } from '../shared/scopes.js';
import type { Clock } from '../shared/time.js';
import { findAppUser, recordAppSignIn } from '../storage/repos/app-users.js';
import type { App, RequiredField } from '../storage/repos/apps.js';
import { findConsentedScope, grantConsent, revokeConsent } from '../storage/repos/consents.js';
import { appendEvent } from '../storage/repos/events.js';
import { type AuthorizationCodeRow, finishPendingGrant, type GrantRow, revokeGrantsOfUser } from '../storage/repos/grants.js';
import { type PublicUser, toPublicUser, updateUser, type UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import type { TokenResponse, TokenService } from '../tokens/service.js';
import {
  type CodeBasisProblem,
  codeBasisProblem,
  type FreshnessDemand,
  type GrantState,
  maySignIn,
  missingRequiredFields,
  mustReauthenticate,
  type NextStep,
  nextStep,
  type RefusalStyle,
  refusalError,
  type SignInRefusal,
} from './policy.js';
import { type ProfileField, type ProfileProblem, parseProfileData } from './profile-data.js';

/**
 * Sign-in, the one home of what every door (hosted authorize and pages, `/v1/auth`, the native
 * provider doors, `/continue`, `/account`) does once it knows who the user is:
 * - policy: may this user sign in to this app, and what step comes next (pure rules in policy.ts);
 * - steps: record consent (+ `consent.granted`), apply profile data through the one validator
 *   (+ `profile.updated`), record an authentication (`user.login_succeeded`);
 * - completion: issue a code, tokens or a provider session, always recording the app sign-in.
 * No door writes consent, profile data, app membership or sign-in events on its own.
 */

/** The sign-in result of CONTRACT §5, shared by register, login, magic-link verify and profile complete. */
export type SignInResult =
  | ({ status: 'ok'; user: PublicUser } & TokenResponse)
  | { status: 'pending'; next_step: 'profile' | 'verify_email'; session: string; required_fields: RequiredField[] };

export interface SignInDeps {
  db: Kysely<Database>;
  clock: Clock;
  tokens: TokenService;
}

const PROBLEM_TEXT: Record<ProfileProblem['reason'] | `invalid_${ProfileField}`, string> = {
  invalid: 'is not valid',
  invalid_name: 'must be 1–100 characters without control characters',
  invalid_phone_number: 'must be an E.164 phone number, e.g. +14155550123',
  invalid_birthdate: 'must be a past date YYYY-MM-DD',
  not_requested: 'is not a missing required field of this app',
  required: 'is required',
};

export class SignIn {
  constructor(private readonly deps: SignInDeps) {}

  private get db(): Kysely<Database> {
    return this.deps.db;
  }

  // Policy -------------------------------------------------------------------------------------------

  async refusal(db: Kysely<Database>, user: UserRow, appId: string): Promise<SignInRefusal | null> {
    return maySignIn(user, await findAppUser(db, appId, user.id));
  }

  /** Throws the door's error when the user may not sign in to the app (disabled, or blocked for it). */
  async assertMaySignIn(db: Kysely<Database>, user: UserRow, appId: string, style: RefusalStyle = 'api'): Promise<void> {
    const cause = await this.refusal(db, user, appId);
    if (cause) throw refusalError(cause, style);
  }

  async nextStep(db: Kysely<Database>, user: UserRow, app: App, grant: Omit<GrantState, 'consentedScope'>): Promise<NextStep> {
    return nextStep(user, app, { ...grant, consentedScope: await findConsentedScope(db, app.id, user.id) });
  }

  /** Whether `prompt=login` or `max_age` sends a signed-in user back to authenticate now (OIDC Core §3.1.2.1). */
  mustReauthenticate(demand: FreshnessDemand, authTime: number): boolean {
    return mustReauthenticate(demand, authTime, this.deps.clock.now());
  }

  /** Whether an authorization code still stands on what it was issued on (checked inside the redemption). */
  async codeBasisProblem(db: Kysely<Database>, code: AuthorizationCodeRow, user: UserRow): Promise<SignInRefusal | CodeBasisProblem | null> {
    const membership = await findAppUser(db, code.app_id, user.id);
    const consentedScope = await findConsentedScope(db, code.app_id, user.id);
    return codeBasisProblem(user, membership, { issuedAt: code.created_at, scope: code.scope, consentedScope });
  }

  // Steps --------------------------------------------------------------------------------------------

  /** Records consent for `scope` (kept as a union with earlier consent) and its event. */
  async grantConsent(db: Kysely<Database>, input: { appId: string; userId: string; scope: string; via: string }, ctx: RequestContext): Promise<void> {
    const now = this.deps.clock.now();
    await grantConsent(db, input.appId, input.userId, input.scope, now);
    await appendEvent(db, now, { type: 'consent.granted', appId: input.appId, userId: input.userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { scope: input.scope, via: input.via } });
  }

  /** Withdraws consent for an app: its grants and unredeemed codes die with it. */
  async revokeConsent(input: { appId: string; userId: string; via: string }, ctx: RequestContext): Promise<void> {
    const now = this.deps.clock.now();
    await this.db.transaction().execute(async (trx) => {
      await revokeConsent(trx, input.appId, input.userId);
      await revokeGrantsOfUser(trx, input.userId, now, 'consent_revoked', input.appId);
      await appendEvent(trx, now, { type: 'consent.revoked', appId: input.appId, userId: input.userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { via: input.via } });
    });
  }

  /**
   * Applies profile data a user supplied, through the one validator (profile-data.ts): only the
   * `accepted` fields may be written. Bad data → 400 `invalid_request` with one `details` entry per
   * field (`path` = `pathPrefix` + field) and nothing written. Records `profile.updated`. Returns the user.
   */
  async applyProfileData(
    db: Kysely<Database>,
    input: {
      user: UserRow;
      appId: string | null;
      data: Partial<Record<ProfileField, string | undefined>>;
      accepted: readonly ProfileField[];
      required?: readonly ProfileField[];
      allowClear?: boolean;
      via: string;
      pathPrefix?: string;
    },
    ctx: RequestContext,
  ): Promise<UserRow> {
    const now = this.deps.clock.now();
    const parsed = parseProfileData(input.data, { accepted: input.accepted, required: input.required, allowClear: input.allowClear, now, current: input.user });
    if (!parsed.ok) {
      throw new AppError('invalid_request', {
        details: parsed.problems.map((p) => ({ path: `${input.pathPrefix ?? ''}${p.field}`, message: PROBLEM_TEXT[p.reason === 'invalid' ? (`invalid_${p.field}` as const) : p.reason] })),
        detail: 'profile data refused',
      });
    }
    const changed = (Object.keys(parsed.patch) as ProfileField[]).filter((field) => parsed.patch[field] !== input.user[field]);
    if (changed.length === 0) return input.user;
    const write = async (trx: Kysely<Database>) => {
      await updateUser(trx, input.user.id, { ...parsed.patch, updated_at: now });
      await appendEvent(trx, now, { type: 'profile.updated', appId: input.appId, userId: input.user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { fields: changed, via: input.via } });
    };
    // Inside the caller's transaction when it has one (a door that writes more in the same step).
    if (db.isTransaction) await write(db);
    else await db.transaction().execute(write);
    return { ...input.user, ...parsed.patch, updated_at: now };
  }

  /** Records a successful authentication (a credential was checked) for the app it was made for. */
  async recordLogin(db: Kysely<Database>, input: { userId: string; appId: string | null; method: string; via?: string }, ctx: RequestContext): Promise<void> {
    await appendEvent(db, this.deps.clock.now(), {
      type: 'user.login_succeeded',
      appId: input.appId,
      userId: input.userId,
      ip: ctx.ip,
      userAgent: ctx.userAgent,
      data: { method: input.method, ...(input.via ? { via: input.via } : {}) },
    });
  }

  // Completion ---------------------------------------------------------------------------------------

  /** Issues an authorization code and records the app sign-in (call inside the door's transaction). */
  async issueCode(
    trx: Kysely<Database>,
    input: { app: App; user: UserRow; redirectUri: string; scope: string; codeChallenge: string | null; nonce: string | null; authTime: number },
  ): Promise<string> {
    await recordAppSignIn(trx, input.app.id, input.user.id, this.deps.clock.now());
    return this.deps.tokens.issueAuthorizationCode(trx, {
      appId: input.app.id,
      userId: input.user.id,
      redirectUri: input.redirectUri,
      scope: input.scope,
      codeChallenge: input.codeChallenge,
      nonce: input.nonce,
      authTime: input.authTime,
    });
  }

  /**
   * Opens a grant for a provider `response_mode=session` sign-in and records the app sign-in; returns
   * the grant id, for the session JWT minted after the transaction commits. No consent is recorded:
   * it comes from `/oauth/authorize` (CONTRACT §14.11).
   */
  async openSession(trx: Kysely<Database>, input: { app: App; user: UserRow; authTime: number }): Promise<string> {
    await recordAppSignIn(trx, input.app.id, input.user.id, this.deps.clock.now());
    return this.deps.tokens.createGrant(trx, { appId: input.app.id, userId: input.user.id, scope: DEFAULT_SCOPE, authTime: input.authTime });
  }

  /**
   * A REST sign-in (register, login, magic link; CONTRACT §5, §14.6, §14.11) of a user the door has
   * authenticated: refused when the user may not sign in; `pending` with a session JWT on a new grant
   * while the app's required data is missing; otherwise app sign-in, implied consent for the default
   * scopes, `user.login_succeeded` and tokens, in one transaction.
   */
  async completeDirect(app: App, user: UserRow, ctx: RequestContext, method: string): Promise<SignInResult> {
    await this.assertMaySignIn(this.db, user, app.id);
    const now = this.deps.clock.now();
    const step = await this.nextStep(this.db, user, app, { requestedScope: DEFAULT_SCOPE, consentImplied: true });
    if (step !== 'done') {
      const grantId = await this.deps.tokens.createGrant(this.db, { appId: app.id, userId: user.id, scope: DEFAULT_SCOPE, authTime: now, awaitingCompletion: true });
      return this.pendingResult(app, user, grantId, step);
    }
    return this.finishDirect(app, user, ctx, { method, authTime: now });
  }

  /**
   * `POST /v1/auth/profile/complete`: finishes the pending REST sign-in of `grant`, once. Only the
   * app's missing required fields may be supplied; a grant that is not a pending REST sign-in (a
   * completed one, or a provider session) → 400 `invalid_token`.
   */
  async completePending(
    app: App,
    grant: GrantRow,
    user: UserRow,
    data: Partial<Record<ProfileField, string | undefined>>,
    ctx: RequestContext,
  ): Promise<SignInResult> {
    if (grant.awaiting_completion !== 1 || grant.app_id !== app.id || grant.user_id !== user.id) {
      throw new AppError('invalid_token', { detail: 'session is not a pending sign-in of this app' });
    }
    await this.assertMaySignIn(this.db, user, app.id);
    const missing = missingRequiredFields(app.requiredFields, user).filter((f): f is ProfileField => f !== 'email_verified');
    const updated = await this.applyProfileData(this.db, { user, appId: app.id, data, accepted: missing, via: 'profile_complete', pathPrefix: 'data.' }, ctx);
    const step = await this.nextStep(this.db, updated, app, { requestedScope: DEFAULT_SCOPE, consentImplied: true });
    if (step !== 'done') return this.pendingResult(app, updated, grant.id, step);
    return this.finishDirect(app, updated, ctx, { method: 'profile_complete', authTime: grant.auth_time, pendingGrantId: grant.id });
  }

  private async pendingResult(app: App, user: UserRow, grantId: string, step: Exclude<NextStep, 'done'>): Promise<SignInResult> {
    const session = await this.deps.tokens.mintSession({ userId: user.id, appId: app.id, grantId });
    return {
      status: 'pending',
      next_step: step === 'verify_email' ? 'verify_email' : 'profile',
      session,
      required_fields: missingRequiredFields(app.requiredFields, user),
    };
  }

  private async finishDirect(app: App, user: UserRow, ctx: RequestContext, options: { method: string; authTime: number; pendingGrantId?: string }): Promise<SignInResult> {
    const now = this.deps.clock.now();
    const response = await this.db.transaction().execute(async (trx) => {
      if (options.pendingGrantId && !(await finishPendingGrant(trx, options.pendingGrantId))) {
        throw new AppError('invalid_token', { detail: 'pending sign-in already completed' });
      }
      await recordAppSignIn(trx, app.id, user.id, now);
      if (!isSubsetScope(DEFAULT_SCOPE, await findConsentedScope(trx, app.id, user.id))) {
        await this.grantConsent(trx, { appId: app.id, userId: user.id, scope: DEFAULT_SCOPE, via: 'sign_in' }, ctx);
      }
      await this.recordLogin(trx, { userId: user.id, appId: app.id, method: options.method }, ctx);
      const issued = await this.deps.tokens.issueTokens(trx, { app, user, scope: DEFAULT_SCOPE, authTime: options.authTime, grantId: options.pendingGrantId });
      return issued.response;
    });
    return { status: 'ok', user: toPublicUser(user), ...response };
  }
}
