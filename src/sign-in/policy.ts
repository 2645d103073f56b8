import { AppError } from '../errors.js';
import { type Amr, isMultiFactor } from '../shared/acr.js';
import { isSubsetScope } from '../shared/scopes.js';
import type { MfaPolicy, RequiredField } from '../storage/repos/apps.js';
import { PLATFORM_DEVELOPER_ID } from '../storage/repos/developers.js';
import type { FactorSummary } from '../storage/repos/factors.js';
import type { UserRow } from '../storage/schema.js';

/**
 * The sign-in policy: who may sign in to an app, what step comes next, and whether an authorization
 * code still stands on the basis it was issued on. Pure functions, table-tested
 * (test/sign-in/policy.test.ts); every door reaches them through `SignIn` (service.ts).
 */

export type SignInRefusal = 'user_disabled' | 'user_blocked' | 'account_deletion_scheduled';

type UserState = Pick<UserRow, 'status'> & { deletion_scheduled_at?: number | null };
type Membership = { status: 'active' | 'blocked' } | undefined;

/**
 * May this user sign in to this app now? Disabled by the admin beats blocked by the app's developer,
 * which beats a scheduled deletion (docs/account/deletion.md: the password sign-in doors offer to keep
 * the account first — they ask `mayAuthenticate`, and each door decides what to offer).
 */
export function maySignIn(user: UserState, membership: Membership): SignInRefusal | null {
  if (user.status !== 'active') return 'user_disabled';
  if (membership?.status === 'blocked') return 'user_blocked';
  if (user.deletion_scheduled_at != null) return 'account_deletion_scheduled';
  return null;
}

/**
 * The account-wide check a first factor makes before its door completes a sign-in: as maySignIn with
 * no app, except that a scheduled deletion is left to the door, which offers to cancel it.
 */
export function mayAuthenticate(user: UserState): SignInRefusal | null {
  return maySignIn({ status: user.status }, undefined);
}

/** Where a refusal is reported: a JSON API door, the authorize redirect, or the token endpoint. */
export type RefusalStyle = 'api' | 'authorize' | 'token';

/** The one error for each refusal cause, in the vocabulary of the door that reports it. */
export function refusalError(cause: SignInRefusal | CodeBasisProblem, style: RefusalStyle): AppError {
  if (style === 'token') return new AppError('invalid_grant', { detail: `grant basis gone: ${cause}`, reason: cause });
  if (cause !== 'user_disabled' && cause !== 'user_blocked' && cause !== 'account_deletion_scheduled') return new AppError('access_denied', { detail: cause });
  if (style === 'api') return new AppError(cause);
  const message =
    cause === 'user_disabled' ? 'This account is disabled.' : cause === 'user_blocked' ? 'This account is blocked for this application.' : 'This account is scheduled for deletion.';
  return new AppError('access_denied', { message, detail: cause });
}

/**
 * The app's required profile fields the user has not supplied yet (docs/reference/rest-api.md#end-user-sign-in), in the app's order. An
 * app that requires a second factor also requires a proven address: factors are enrolled only on one
 * (canEnrolFactors).
 */
export function missingRequiredFields(
  app: { requiredFields: readonly RequiredField[]; mfa: MfaPolicy },
  user: Pick<UserRow, 'name' | 'phone_number' | 'birthdate' | 'email_verified'>,
): RequiredField[] {
  const required = app.mfa === 'required' && !app.requiredFields.includes('email_verified') ? [...app.requiredFields, 'email_verified' as const] : app.requiredFields;
  return required.filter((field) => {
    if (field === 'email_verified') return user.email_verified !== 1;
    const value = user[field];
    return value === null || value === '';
  });
}

// Second factor ---------------------------------------------------------------------------------------

/** The second factors a user can enrol (docs/guides/mfa-and-passkeys.md `methods`). */
export type SecondFactor = 'totp' | 'passkey' | 'recovery_code';

/**
 * The second factors a sign-in may ask for (docs/guides/mfa-and-passkeys.md `methods`), in the order shown. Recovery
 * codes count only beside a real factor: they back one up, and alone they would lock in a user who
 * removed the factor they belonged to.
 */
export function secondFactorsOf(summary: FactorSummary): SecondFactor[] {
  const methods: SecondFactor[] = [];
  if (summary.totp) methods.push('totp');
  if (summary.passkeys > 0) methods.push('passkey');
  if (methods.length > 0 && summary.recoveryCodes > 0) methods.push('recovery_code');
  return methods;
}

/**
 * What an authentication still needs: nothing, a factor the user has (`verify`), enrolling one first
 * (`enrol`), or, before an enrolment, proving the email address (`verify_email`).
 */
export type SecondFactorDemand = 'none' | 'verify' | 'enrol' | 'verify_email';

/**
 * Must this authentication be completed by a second factor? Not when it already is multi-factor (or
 * a passkey). A user who enrolled a factor is always asked for it, whatever the app's policy: it was the
 * user's own choice to protect the account, and an app cannot waive it. A user without one is made to
 * enrol only by an app that requires MFA; `off` and `optional` both let such a user through — and an
 * account whose address is not proven enrols nothing until it is (`verify_email`): whoever registered
 * it may not own the mailbox, and the owner's claim must not meet a stranger's factor (canEnrolFactors).
 * A step-up (the account page before changing factors) asks for a factor the user has even from a
 * session that is already multi-factor: it proves the factor is still at hand now.
 */
export function secondFactorDemand(
  amr: readonly Amr[],
  enrolled: readonly SecondFactor[],
  policy: MfaPolicy,
  account: { emailVerified: boolean },
  stepUp = false,
): SecondFactorDemand {
  if (stepUp && enrolled.length > 0) return 'verify';
  if (isMultiFactor(amr)) return 'none';
  if (enrolled.length > 0) return 'verify';
  if (policy !== 'required') return 'none';
  return canEnrolFactors(account) ? 'enrol' : 'verify_email';
}

/** Is a second step due now: a factor to give (`verify`) or one to set up (`enrol`)? */
export function isFactorDue(demand: SecondFactorDemand): boolean {
  return demand === 'verify' || demand === 'enrol';
}

/**
 * Factors (an authenticator app, passkeys, recovery codes) are enrolled only on an account whose
 * address is proven: until then whoever registered it may not own the mailbox, and the claim by the
 * mailbox owner removes whatever they added (SECURITY: pre-account takeover).
 */
export function canEnrolFactors(account: { emailVerified: boolean }): boolean {
  return account.emailVerified;
}

/** The `amr` after a second factor: the first factor's, the new method, and `mfa`. */
export function withSecondFactor(amr: readonly Amr[], method: 'otp' | 'swk'): Amr[] {
  return [...new Set<Amr>([...amr, method, 'mfa'])];
}

/** How long a sign-in counts as fresh for changing second factors. */
export const FACTOR_CHANGE_FRESH_SECONDS = 900;

export type FactorChangeRefusal = 'email_unverified' | 'needs_second_factor' | 'needs_fresh_sign_in';

/**
 * May this signed-in session add (`add`), or remove or replace (`change`), second factors and other
 * credentials (authenticator app, recovery codes, passkeys)? Adding needs a proven address
 * (canEnrolFactors). Then: freely while the account has no factor; once it has one, only from a session
 * that proved a second factor (or a passkey) within FACTOR_CHANGE_FRESH_SECONDS: a stolen password, or
 * a session left open, must not be enough to remove the factor that protects the account or to add one.
 */
export function factorChangeRefusal(
  account: { enrolled: readonly SecondFactor[]; emailVerified: boolean },
  change: 'add' | 'change',
  session: { amr: readonly Amr[]; authTime: number },
  now: number,
): FactorChangeRefusal | null {
  if (change === 'add' && !canEnrolFactors(account)) return 'email_unverified';
  const enrolled = account.enrolled;
  if (enrolled.length === 0) return null;
  if (!isMultiFactor(session.amr)) return 'needs_second_factor';
  if (now - session.authTime > FACTOR_CHANGE_FRESH_SECONDS) return 'needs_fresh_sign_in';
  return null;
}

export type NextStep = 'mfa' | 'consent' | 'profile' | 'verify_email' | 'done';

/**
 * An app of the platform itself (the developer console): signing in to it is consenting to it, so its
 * consent is recorded without a screen that asks (a developer would otherwise be asked by Gatehouse
 * whether Gatehouse may know their email).
 */
export const consentIsImplied = (app: { developerId: string }): boolean => app.developerId === PLATFORM_DEVELOPER_ID;

export interface GrantState {
  /** The scopes this sign-in asks for. */
  requestedScope: string;
  /** What the user has consented to for this app so far ('' when nothing). */
  consentedScope: string;
  /** `prompt=consent`: show the consent page even when consent exists. */
  forceConsent?: boolean;
  /**
   * The user typed their credentials into the app itself (REST sign-in, docs/reference/rest-api.md#end-user-sign-in): consent is
   * implied and recorded at completion, never a step.
   */
  consentImplied?: boolean;
  /** How the user authenticated for this sign-in, and the second factors they have enrolled. */
  amr: readonly Amr[];
  enrolled: readonly SecondFactor[];
}

/**
 * What a signed-in user still has to do before the app gets a code, tokens or a session: a second
 * factor first (until then the user is not authenticated, so nothing else is shown; an address not yet
 * proven comes before enrolling one), then consent
 * (nothing is shown to an app the user has not allowed), then the app's required profile data, then a
 * verified email address.
 */
export function nextStep(
  user: Pick<UserRow, 'name' | 'phone_number' | 'birthdate' | 'email_verified'>,
  app: { requiredFields: RequiredField[]; mfa: MfaPolicy },
  grant: GrantState,
): NextStep {
  const demand = secondFactorDemand(grant.amr, grant.enrolled, app.mfa, { emailVerified: user.email_verified === 1 });
  if (isFactorDue(demand)) return 'mfa';
  // An app that requires a factor the user cannot enrol yet: the address first, then the factor.
  if (demand === 'verify_email') return 'verify_email';
  if (!grant.consentImplied && (grant.forceConsent || !isSubsetScope(grant.requestedScope, grant.consentedScope))) return 'consent';
  const missing = missingRequiredFields(app, user);
  if (missing.some((field) => field !== 'email_verified')) return 'profile';
  if (missing.length > 0) return 'verify_email';
  return 'done';
}

/** How recent an authentication an authorization request demands (OIDC Core §3.1.2.1). */
export interface FreshnessDemand {
  /** `prompt=login`. */
  promptLogin: boolean;
  /** `max_age`, in seconds. */
  maxAge?: number;
}

/**
 * Must a signed-in user authenticate again before the request goes on? `prompt=login` always;
 * `max_age` when the last authentication (`auth_time`) is older than it allows, and `max_age=0`
 * always (OIDC Core: it is equivalent to `prompt=login`). The authentication this demands is the one
 * the resumed request then uses, so a resumed request carries neither demand.
 */
export function mustReauthenticate(demand: FreshnessDemand, authTime: number, now: number): boolean {
  if (demand.promptLogin || demand.maxAge === 0) return true;
  return demand.maxAge !== undefined && now - authTime > demand.maxAge;
}

export type CodeBasisProblem = 'consent_revoked' | 'password_changed';

export interface CodeBasis {
  /** When the code was issued. */
  issuedAt: number;
  scope: string;
  /** What the user has consented to for the app now. */
  consentedScope: string;
}

/**
 * An authorization code is redeemed only while what it was issued on still holds: the user may still
 * sign in to the app, the consent it relied on is still there, and the password has not changed since.
 */
export function codeBasisProblem(
  user: Pick<UserRow, 'status' | 'password_changed_at'>,
  membership: Membership,
  basis: CodeBasis,
): SignInRefusal | CodeBasisProblem | null {
  const refusal = maySignIn(user, membership);
  if (refusal) return refusal;
  if (!isSubsetScope(basis.scope, basis.consentedScope)) return 'consent_revoked';
  if (user.password_changed_at !== null && user.password_changed_at > basis.issuedAt) return 'password_changed';
  return null;
}
