import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import { type Amr, parseAmr, serializeAmr } from '../shared/acr.js';
import { type Device, deviceOf } from '../shared/ip-area.js';
import type { RequestContext } from '../shared/request-context.js';
import { DEFAULT_SCOPE, isSubsetScope } from '../shared/scopes.js';
import type { Clock } from '../shared/time.js';
import { findAppUser, recordAppSignIn } from '../storage/repos/app-users.js';
import type { App, RequiredField } from '../storage/repos/apps.js';
import { findConsentedScope, grantConsent, revokeConsent } from '../storage/repos/consents.js';
import { appendEvent } from '../storage/repos/events.js';
import { AWAITING, awaitSecondFactor, type CodeRedemption, finishPendingGrant, type GrantRow, recordSecondFactor, revokeGrantsOfUser } from '../storage/repos/grants.js';
import { findSignInBasis, type SignInBasis } from '../storage/repos/sign-in-basis.js';
import { decideDeviceAuthorization } from '../storage/repos/device-authorizations.js';
import { type PublicUser, toPublicUser, updateUser, type UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import { inTransaction } from '../storage/transaction.js';
import { bindRefreshTo, type TokenResponse, type TokenService } from '../tokens/service.js';
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
  type SecondFactor,
  type SecondFactorDemand,
  secondFactorDemand,
  secondFactorsOf,
  type SignInRefusal,
  withSecondFactor,
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

/**
 * The sign-in result of docs/reference/rest-api.md#end-user-sign-in, docs/guides/mfa-and-passkeys.md, shared by register, login, magic-link verify, passkey
 * sign-in, profile complete and the second-factor step. `enroll` lists what the user may set up now
 * when an app requires a second factor the user does not have yet.
 */
export type SignInResult =
  | ({ status: 'ok'; user: PublicUser; recovery_codes?: string[] } & TokenResponse)
  | { status: 'pending'; next_step: 'profile' | 'verify_email'; session: string; required_fields: RequiredField[] }
  | { status: 'pending'; next_step: 'mfa'; session: string; methods: SecondFactor[]; enroll?: ['totp'] };

/** How the user proved who they are before any second factor: its name in events, and its `amr`. */
export interface FirstFactor {
  method: string;
  amr: Amr[];
}

export const FIRST_FACTOR = {
  password: { method: 'password', amr: ['pwd'] },
  register: { method: 'register', amr: ['pwd'] },
  magicLink: { method: 'magic_link', amr: ['email'] },
  provider: { method: 'idp', amr: ['fed'] },
} as const satisfies Record<string, FirstFactor>;

/** The proof of a second factor a door received: a typed code (TOTP or recovery), or a checked passkey. */
export type SecondFactorProof = { kind: 'code'; code: string } | { kind: 'passkey'; amr: 'swk' };

/** Who started an authenticator-app enrolment, and alone may see and confirm it: `session:<id hash>` or `grant:<id>`. */
export type EnrolmentOwner = `session:${string}` | `grant:${string}`;

/** What signing in needs of the second factors (the `Mfa` service of mfa/service.ts provides it). */
export interface SecondFactors {
  /** The factors a sign-in may ask this user for (policy.ts secondFactorsOf). */
  enrolled(db: Kysely<Database>, userId: string): Promise<SecondFactor[]>;
  /** Confirms the authenticator app `owner` is setting up with its first code; the first factor's recovery codes, once. */
  confirmTotp(userId: string, owner: EnrolmentOwner, code: string, ctx: RequestContext): Promise<{ recoveryCodes: string[] | null }>;
  /** Checks an authenticator-app or recovery code (under the lockout); which one it was. */
  verifyCode(userId: string, code: string, ctx: RequestContext): Promise<'totp' | 'recovery_code'>;
}

export interface SignInDeps {
  db: Kysely<Database>;
  clock: Clock;
  tokens: TokenService;
  mfa: SecondFactors;
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

  /**
   * The policy a door applies once it knows who the user is: throws the door's error when the user may
   * not sign in to the app, else returns the step that comes next. One read of the sign-in basis.
   */
  async admit(db: Kysely<Database>, user: UserRow, app: App, grant: Omit<GrantState, 'consentedScope' | 'enrolled'>, style: RefusalStyle = 'api'): Promise<NextStep> {
    const basis = await findSignInBasis(db, app.id, user.id);
    const cause = maySignIn(user, basis.membership);
    if (cause) throw refusalError(cause, style);
    return this.stepOn(basis, user, app, grant);
  }

  /** The step that comes next for a user already admitted (assertMaySignIn or admit). */
  async nextStep(db: Kysely<Database>, user: UserRow, app: App, grant: Omit<GrantState, 'consentedScope' | 'enrolled'>): Promise<NextStep> {
    return this.stepOn(await findSignInBasis(db, app.id, user.id), user, app, grant);
  }

  private stepOn(basis: SignInBasis, user: UserRow, app: App, grant: Omit<GrantState, 'consentedScope' | 'enrolled'>): NextStep {
    return nextStep(user, app, Object.assign({}, grant, { consentedScope: basis.consentedScope, enrolled: secondFactorsOf(basis.factors) })); // docs/adr/0011-hot-path-object-shapes.md
  }

  /**
   * Whether an authentication needs a second factor before it counts, for this app or (`app`
   * undefined: the account page) for the user alone: the one rule every door asks (policy.ts).
   */
  async secondFactorDemand(
    db: Kysely<Database>,
    user: Pick<UserRow, 'id' | 'email_verified'>,
    amr: readonly Amr[],
    app: Pick<App, 'mfa'> | undefined,
    stepUp = false,
  ): Promise<{ demand: SecondFactorDemand; methods: SecondFactor[] }> {
    const methods = await this.deps.mfa.enrolled(db, user.id);
    return { demand: secondFactorDemand(amr, methods, app?.mfa ?? 'optional', { emailVerified: user.email_verified === 1 }, stepUp), methods };
  }

  /**
   * Checks a second factor for a user whose first factor is `amr`, and returns the strengthened `amr`.
   * A code is an authenticator-app or recovery code (Mfa.verifyCode, under the login lockout); a
   * passkey was checked by the door (Passkeys.verifyAuthentication). With nothing enrolled and an app
   * that requires a second factor, the code confirms the authenticator app `owner` is setting up, and
   * the first recovery codes come back once.
   */
  async checkSecondFactor(
    userId: string,
    amr: readonly Amr[],
    proof: SecondFactorProof,
    demand: SecondFactorDemand,
    owner: EnrolmentOwner,
    ctx: RequestContext,
  ): Promise<{ amr: Amr[]; method: string; recoveryCodes?: string[] }> {
    if (demand !== 'verify' && demand !== 'enrol') throw new AppError('invalid_request', { message: 'No second factor is due for this sign-in.' });
    if (proof.kind === 'passkey') return { amr: withSecondFactor(amr, proof.amr), method: 'passkey' };
    if (demand === 'enrol') {
      const { recoveryCodes } = await this.deps.mfa.confirmTotp(userId, owner, proof.code, ctx);
      return { amr: withSecondFactor(amr, 'otp'), method: 'totp', ...(recoveryCodes ? { recoveryCodes } : {}) };
    }
    const method = await this.deps.mfa.verifyCode(userId, proof.code, ctx);
    return { amr: withSecondFactor(amr, 'otp'), method };
  }

  /** Whether `prompt=login` or `max_age` sends a signed-in user back to authenticate now (OIDC Core §3.1.2.1). */
  mustReauthenticate(demand: FreshnessDemand, authTime: number): boolean {
    return mustReauthenticate(demand, authTime, this.deps.clock.now());
  }

  /**
   * Whether an authorization code still stands on what it was issued on, judged on its redemption basis
   * as the consuming statement read it (inside the redemption).
   */
  codeBasisProblem(redemption: CodeRedemption & { user: UserRow }): SignInRefusal | CodeBasisProblem | null {
    const { code, user, membership, consentedScope } = redemption;
    return codeBasisProblem(user, membership, { issuedAt: code.created_at, scope: code.scope, consentedScope });
  }

  /**
   * Whether a device authorization (RFC 8628) approved at `issuedAt` still stands when the device redeems
   * it: the rule an authorization code's basis follows (policy.ts: codeBasisProblem), read now.
   */
  async deviceBasisProblem(db: Kysely<Database>, user: UserRow, appId: string, approval: { issuedAt: number; scope: string }): Promise<SignInRefusal | CodeBasisProblem | null> {
    const basis = await findSignInBasis(db, appId, user.id);
    return codeBasisProblem(user, basis.membership, { issuedAt: approval.issuedAt, scope: approval.scope, consentedScope: basis.consentedScope });
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
    await inTransaction(db, write);
    return { ...input.user, ...parsed.patch, updated_at: now };
  }

  /** Records a successful authentication (every factor it needs was checked) for the app it was made for. */
  async recordLogin(db: Kysely<Database>, input: { userId: string; appId: string | null; method: string; amr: readonly Amr[]; via?: string }, ctx: RequestContext): Promise<void> {
    await appendEvent(db, this.deps.clock.now(), {
      type: 'user.login_succeeded',
      appId: input.appId,
      userId: input.userId,
      ip: ctx.ip,
      userAgent: ctx.userAgent,
      data: { method: input.method, amr: input.amr, ...(input.via ? { via: input.via } : {}) },
    });
  }

  // Completion ---------------------------------------------------------------------------------------

  /** Issues an authorization code and records the app sign-in (call inside the door's transaction). */
  async issueCode(
    trx: Kysely<Database>,
    input: { app: App; user: UserRow; redirectUri: string; scope: string; codeChallenge: string | null; nonce: string | null; authTime: number; amr: readonly Amr[]; device?: Device; dpopJkt?: string; sid?: string | null; resources?: readonly string[] },
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
      amr: input.amr,
      device: input.device,
      dpopJkt: input.dpopJkt,
      sid: input.sid,
      resources: input.resources,
    });
  }

  /**
   * The person's decision on a device authorization request (RFC 8628 §3.3) from the `/device` page: an
   * approval records the app sign-in, as issueCode does (call inside the page's transaction). False when
   * the request was decided meanwhile or has expired. Without `approval` (how the person authenticated), a denial.
   */
  async decideDevice(
    trx: Kysely<Database>,
    input: { app: App; user: UserRow; deviceCodeHash: string; approval?: { authTime: number; amr: readonly Amr[] } },
  ): Promise<boolean> {
    const now = this.deps.clock.now();
    const { approval } = input;
    const decided = await decideDeviceAuthorization(trx, input.deviceCodeHash, {
      status: approval ? 'approved' : 'denied',
      userId: input.user.id,
      authTime: approval?.authTime ?? null,
      amr: approval ? serializeAmr(approval.amr) : null,
      now,
    });
    if (decided && approval) await recordAppSignIn(trx, input.app.id, input.user.id, now);
    return decided;
  }

  /**
   * Opens a grant for a provider `response_mode=session` sign-in and records the app sign-in; returns
   * the grant id, for the session JWT minted after the transaction commits. No consent is recorded:
   * it comes from `/oauth/authorize` (docs/reference/rest-api.md#consent-from-a-rest-sign-in).
   */
  async openSession(trx: Kysely<Database>, input: { app: App; user: UserRow; authTime: number; amr: readonly Amr[]; device?: Device }): Promise<string> {
    await recordAppSignIn(trx, input.app.id, input.user.id, this.deps.clock.now());
    return this.deps.tokens.createGrant(trx, { appId: input.app.id, userId: input.user.id, scope: DEFAULT_SCOPE, authTime: input.authTime, amr: input.amr, device: input.device });
  }

  /**
   * A REST sign-in (register, login, magic link; docs/reference/rest-api.md) of a user the door has
   * authenticated: refused when the user may not sign in; `pending` with a session JWT on a new grant
   * while the app's required data is missing; otherwise app sign-in, implied consent for the default
   * scopes, `user.login_succeeded` and tokens, in one transaction.
   */
  async completeDirect(app: App, user: UserRow, ctx: RequestContext, factor: FirstFactor): Promise<SignInResult> {
    const step = await this.admit(this.db, user, app, { requestedScope: DEFAULT_SCOPE, consentImplied: true, amr: factor.amr });
    const now = this.deps.clock.now();
    if (step !== 'done') {
      const grantId = await this.deps.tokens.createGrant(this.db, {
        appId: app.id,
        userId: user.id,
        scope: DEFAULT_SCOPE,
        authTime: now,
        amr: factor.amr,
        awaiting: step === 'mfa' ? AWAITING.secondFactor : AWAITING.restSignIn,
        device: deviceOf(ctx),
        dpopJkt: bindRefreshTo(app, ctx.dpopJkt),
      });
      return this.pendingResult(app, user, grantId, step, factor.amr);
    }
    return this.finishDirect(app, user, ctx, { method: factor.method, amr: factor.amr, authTime: now });
  }

  /**
   * The second factor of a grant that waits for one (a REST sign-in, or a provider session of the
   * native door): checked, recorded on the grant once (a concurrent second proof loses), and the grant
   * then waits for `next`. Returns the strengthened `amr`.
   */
  async secondFactorOfGrant(
    app: App,
    grant: GrantRow,
    user: UserRow,
    proof: SecondFactorProof,
    next: typeof AWAITING.restSignIn | typeof AWAITING.nothing,
    ctx: RequestContext,
  ): Promise<{ amr: Amr[]; method: string; recoveryCodes?: string[] }> {
    this.assertPendingOf(app, grant, user, 'second_factor');
    await this.assertMaySignIn(this.db, user, app.id);
    const firstAmr = parseAmr(grant.amr);
    const { demand } = await this.secondFactorDemand(this.db, user, firstAmr, app);
    const checked = await this.checkSecondFactor(user.id, firstAmr, proof, demand, enrolmentOwnerOf(grant), ctx);
    if (!(await recordSecondFactor(this.db, grant.id, serializeAmr(checked.amr), next))) {
      throw new AppError('invalid_token', { detail: 'second factor already given for this sign-in' });
    }
    return checked;
  }

  /** A pending sign-in (`session`) of this app waiting for `what`; anything else → 400 `invalid_token`. */
  private assertPendingOf(app: App, grant: GrantRow, user: UserRow, what: 'rest_sign_in' | 'second_factor'): void {
    const awaiting = what === 'rest_sign_in' ? AWAITING.restSignIn : AWAITING.secondFactor;
    if (grant.awaiting_completion !== awaiting || grant.app_id !== app.id || grant.user_id !== user.id) {
      throw new AppError('invalid_token', { detail: `session is not a sign-in of this app waiting for ${what}` });
    }
  }

  /**
   * `POST /v1/auth/mfa/verify` (and a passkey as second factor): the second step of a pending REST
   * sign-in. The factor is recorded on the grant, then the sign-in goes on like any other: the next
   * pending step, or tokens.
   */
  async completeSecondFactor(app: App, grant: GrantRow, user: UserRow, proof: SecondFactorProof, ctx: RequestContext): Promise<SignInResult> {
    const checked = await this.secondFactorOfGrant(app, grant, user, proof, AWAITING.restSignIn, ctx);
    const step = await this.nextStep(this.db, user, app, { requestedScope: DEFAULT_SCOPE, consentImplied: true, amr: checked.amr });
    if (step !== 'done') return this.pendingResult(app, user, grant.id, step, checked.amr);
    const result = await this.finishDirect(app, user, ctx, { method: checked.method, amr: checked.amr, authTime: grant.auth_time, pendingGrantId: grant.id });
    return checked.recoveryCodes && result.status === 'ok' ? { ...result, recovery_codes: checked.recoveryCodes } : result;
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
    // A grant waiting for its second factor is refused here: profile data is not taken from someone
    // who has not finished signing in.
    this.assertPendingOf(app, grant, user, 'rest_sign_in');
    await this.assertMaySignIn(this.db, user, app.id);
    const amr = parseAmr(grant.amr);
    const missing = missingRequiredFields(app, user).filter((f): f is ProfileField => f !== 'email_verified');
    const updated = await this.applyProfileData(this.db, { user, appId: app.id, data, accepted: missing, via: 'profile_complete', pathPrefix: 'data.' }, ctx);
    const step = await this.nextStep(this.db, updated, app, { requestedScope: DEFAULT_SCOPE, consentImplied: true, amr });
    // The address proven since (email verification), an app that requires a factor has one enrolled now.
    if (step === 'mfa' && !(await awaitSecondFactor(this.db, grant.id))) throw new AppError('invalid_token', { detail: 'pending sign-in completed meanwhile' });
    if (step !== 'done') return this.pendingResult(app, updated, grant.id, step, amr);
    return this.finishDirect(app, updated, ctx, { method: 'profile_complete', amr, authTime: grant.auth_time, pendingGrantId: grant.id });
  }

  private async pendingResult(app: App, user: UserRow, grantId: string, step: Exclude<NextStep, 'done'>, amr: readonly Amr[]): Promise<SignInResult> {
    const session = await this.deps.tokens.mintSession({ userId: user.id, appId: app.id, grantId });
    if (step === 'mfa') {
      const { demand, methods } = await this.secondFactorDemand(this.db, user, amr, app);
      return { status: 'pending', next_step: 'mfa', session, methods, ...(demand === 'enrol' ? { enroll: ['totp'] as ['totp'] } : {}) };
    }
    return {
      status: 'pending',
      next_step: step === 'verify_email' ? 'verify_email' : 'profile',
      session,
      required_fields: missingRequiredFields(app, user),
    };
  }

  private async finishDirect(
    app: App,
    user: UserRow,
    ctx: RequestContext,
    options: { method: string; amr: readonly Amr[]; authTime: number; pendingGrantId?: string },
  ): Promise<SignInResult> {
    const now = this.deps.clock.now();
    const response = await this.db.transaction().execute(async (trx) => {
      if (options.pendingGrantId && !(await finishPendingGrant(trx, options.pendingGrantId))) {
        throw new AppError('invalid_token', { detail: 'pending sign-in already completed' });
      }
      await recordAppSignIn(trx, app.id, user.id, now);
      if (!isSubsetScope(DEFAULT_SCOPE, await findConsentedScope(trx, app.id, user.id))) {
        await this.grantConsent(trx, { appId: app.id, userId: user.id, scope: DEFAULT_SCOPE, via: 'sign_in' }, ctx);
      }
      await this.recordLogin(trx, { userId: user.id, appId: app.id, method: options.method, amr: options.amr }, ctx);
      const issued = await this.deps.tokens.issueTokens(trx, { app, user, scope: DEFAULT_SCOPE, authTime: options.authTime, amr: options.amr, grantId: options.pendingGrantId, device: deviceOf(ctx), dpopJkt: ctx.dpopJkt });
      return issued.response;
    });
    return { status: 'ok', user: toPublicUser(user), ...response };
  }
}

/** The owner of an authenticator app set up during a pending sign-in: the sign-in's grant (Mfa.beginTotp). */
export const enrolmentOwnerOf = (grant: Pick<GrantRow, 'id'>): EnrolmentOwner => `grant:${grant.id}`;
