import type { Amr } from '../../src/shared/acr.js';
import type { FactorChangeRefusal, NextStep, SecondFactor, SecondFactorDemand, SignInRefusal } from '../../src/sign-in/policy.js';
import type { MfaPolicy } from '../../src/storage/repos/apps.js';
import type { RequiredField } from '../../src/storage/repos/apps.js';

/**
 * The sign-in policy as a table: each (user state × app settings × grant state) with the decision.
 * Run against the pure rules in policy.test.ts and reused by the door tests, so every door is held to
 * the same rows.
 */

export interface MaySignInCase {
  name: string;
  userStatus: 'active' | 'disabled';
  /** The user's membership of the app: none yet, active, or blocked by the app's developer. */
  membership: 'none' | 'active' | 'blocked';
  expected: SignInRefusal | null;
}

export const MAY_SIGN_IN_CASES: MaySignInCase[] = [
  { name: 'active user, first sign-in to the app', userStatus: 'active', membership: 'none', expected: null },
  { name: 'active user, returning member', userStatus: 'active', membership: 'active', expected: null },
  { name: 'user blocked for this app', userStatus: 'active', membership: 'blocked', expected: 'user_blocked' },
  { name: 'user disabled by the admin', userStatus: 'disabled', membership: 'none', expected: 'user_disabled' },
  { name: 'disabled and blocked: disabled wins', userStatus: 'disabled', membership: 'blocked', expected: 'user_disabled' },
];

export interface NextStepCase {
  name: string;
  user: { name: string | null; phone_number: string | null; birthdate: string | null; email_verified: 0 | 1 };
  requiredFields: RequiredField[];
  requestedScope: string;
  consentedScope: string;
  forceConsent?: boolean;
  consentImplied?: boolean;
  /** The app's second-factor policy (default optional), how the user authenticated (default a password) and what they enrolled (default nothing). */
  mfa?: MfaPolicy;
  amr?: Amr[];
  enrolled?: SecondFactor[];
  expected: NextStep;
}

const complete = { name: 'Ada', phone_number: '+14155550100', birthdate: '1990-02-03', email_verified: 1 as const };
const bare = { name: null, phone_number: null, birthdate: null, email_verified: 0 as const };
const ALL = 'email openid profile';

export const NEXT_STEP_CASES: NextStepCase[] = [
  { name: 'nothing required, consent given', user: bare, requiredFields: [], requestedScope: ALL, consentedScope: ALL, expected: 'done' },
  { name: 'no consent yet', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: '', expected: 'consent' },
  { name: 'consent narrower than the request', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: 'openid profile', expected: 'consent' },
  { name: 'consent wider than the request', user: complete, requiredFields: [], requestedScope: 'openid', consentedScope: ALL, expected: 'done' },
  { name: 'prompt=consent forces the page', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, forceConsent: true, expected: 'consent' },
  { name: 'consent comes before profile data', user: bare, requiredFields: ['name'], requestedScope: ALL, consentedScope: '', expected: 'consent' },
  { name: 'REST sign-in implies consent', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: '', consentImplied: true, expected: 'done' },
  { name: 'required name missing', user: bare, requiredFields: ['name'], requestedScope: ALL, consentedScope: ALL, expected: 'profile' },
  { name: 'required phone missing, REST', user: { ...complete, phone_number: null }, requiredFields: ['phone_number'], requestedScope: ALL, consentedScope: '', consentImplied: true, expected: 'profile' },
  { name: 'empty name counts as missing', user: { ...complete, name: '' }, requiredFields: ['name'], requestedScope: ALL, consentedScope: ALL, expected: 'profile' },
  { name: 'only a verified address missing', user: { ...complete, email_verified: 0 }, requiredFields: ['email_verified'], requestedScope: ALL, consentedScope: ALL, expected: 'verify_email' },
  { name: 'profile data before email verification', user: bare, requiredFields: ['email_verified', 'birthdate'], requestedScope: ALL, consentedScope: ALL, expected: 'profile' },
  { name: 'every required field present', user: complete, requiredFields: ['name', 'phone_number', 'birthdate', 'email_verified'], requestedScope: ALL, consentedScope: ALL, expected: 'done' },
  { name: 'enrolled TOTP, password only', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, enrolled: ['totp', 'recovery_code'], expected: 'mfa' },
  { name: 'second factor comes before consent', user: bare, requiredFields: ['name'], requestedScope: ALL, consentedScope: '', enrolled: ['totp'], expected: 'mfa' },
  { name: 'second factor even when the app has MFA off', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, mfa: 'off', enrolled: ['totp'], expected: 'mfa' },
  { name: 'enrolled, second factor given', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, enrolled: ['totp'], amr: ['pwd', 'otp', 'mfa'], expected: 'done' },
  { name: 'enrolled, passkey sign-in', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, enrolled: ['passkey'], amr: ['hwk'], expected: 'done' },
  { name: 'magic link of an enrolled user', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, enrolled: ['passkey'], amr: ['email'], expected: 'mfa' },
  { name: 'app requires MFA, nothing enrolled', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, mfa: 'required', expected: 'mfa' },
  { name: 'app requires MFA, given', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: '', mfa: 'required', amr: ['fed', 'otp', 'mfa'], enrolled: ['totp'], expected: 'consent' },
  { name: 'optional MFA, nothing enrolled', user: complete, requiredFields: [], requestedScope: ALL, consentedScope: ALL, mfa: 'optional', expected: 'done' },
  // A factor is enrolled only on a proven address: an app that requires one asks for the address first.
  { name: 'app requires MFA, nothing enrolled, address not verified', user: { ...complete, email_verified: 0 }, requiredFields: [], requestedScope: ALL, consentedScope: '', mfa: 'required', expected: 'verify_email' },
  { name: 'app requires MFA, address not verified, REST', user: bare, requiredFields: ['name'], requestedScope: ALL, consentedScope: '', consentImplied: true, mfa: 'required', expected: 'verify_email' },
  { name: 'app requires MFA, factor enrolled and given, address not verified', user: { ...complete, email_verified: 0 }, requiredFields: [], requestedScope: ALL, consentedScope: ALL, mfa: 'required', amr: ['pwd', 'otp', 'mfa'], enrolled: ['totp'], expected: 'verify_email' },
  { name: 'app requires MFA, factor enrolled, address not verified: the factor first', user: { ...complete, email_verified: 0 }, requiredFields: [], requestedScope: ALL, consentedScope: ALL, mfa: 'required', enrolled: ['totp'], expected: 'mfa' },
];

export interface SecondFactorCase {
  name: string;
  amr: Amr[];
  enrolled: SecondFactor[];
  policy: MfaPolicy;
  stepUp?: boolean;
  /** Whether the account's address is proven (default yes). */
  emailVerified?: boolean;
  expected: SecondFactorDemand;
}

export const SECOND_FACTOR_CASES: SecondFactorCase[] = [
  { name: 'password, nothing enrolled, optional', amr: ['pwd'], enrolled: [], policy: 'optional', expected: 'none' },
  { name: 'password, nothing enrolled, off', amr: ['pwd'], enrolled: [], policy: 'off', expected: 'none' },
  { name: 'password, nothing enrolled, required', amr: ['pwd'], enrolled: [], policy: 'required', expected: 'enrol' },
  { name: 'password, TOTP enrolled, off', amr: ['pwd'], enrolled: ['totp'], policy: 'off', expected: 'verify' },
  { name: 'password, TOTP enrolled, required', amr: ['pwd'], enrolled: ['totp', 'recovery_code'], policy: 'required', expected: 'verify' },
  { name: 'magic link, passkey enrolled', amr: ['email'], enrolled: ['passkey'], policy: 'optional', expected: 'verify' },
  { name: 'provider, TOTP enrolled', amr: ['fed'], enrolled: ['totp'], policy: 'optional', expected: 'verify' },
  { name: 'two factors given', amr: ['pwd', 'otp', 'mfa'], enrolled: ['totp'], policy: 'required', expected: 'none' },
  { name: 'device-bound passkey alone', amr: ['hwk'], enrolled: ['passkey'], policy: 'required', expected: 'none' },
  { name: 'synced passkey alone', amr: ['swk'], enrolled: [], policy: 'required', expected: 'none' },
  { name: 'a code alone is not two factors', amr: ['otp'], enrolled: ['totp'], policy: 'optional', expected: 'verify' },
  { name: 'no amr recorded (older rows)', amr: [], enrolled: ['totp'], policy: 'optional', expected: 'verify' },
  { name: 'step-up of a two-factor session', amr: ['pwd', 'otp', 'mfa'], enrolled: ['totp'], policy: 'optional', stepUp: true, expected: 'verify' },
  { name: 'step-up of a passkey session', amr: ['hwk'], enrolled: ['passkey'], policy: 'off', stepUp: true, expected: 'verify' },
  { name: 'step-up with nothing enrolled: nothing to ask', amr: ['pwd'], enrolled: [], policy: 'optional', stepUp: true, expected: 'none' },
  { name: 'step-up with nothing enrolled, app requires MFA', amr: ['pwd'], enrolled: [], policy: 'required', stepUp: true, expected: 'enrol' },
  { name: 'app requires MFA, nothing enrolled, address not proven', amr: ['pwd'], enrolled: [], policy: 'required', emailVerified: false, expected: 'verify_email' },
  { name: 'address not proven, optional MFA', amr: ['pwd'], enrolled: [], policy: 'optional', emailVerified: false, expected: 'none' },
  { name: 'address not proven, factor enrolled', amr: ['pwd'], enrolled: ['totp'], policy: 'required', emailVerified: false, expected: 'verify' },
];

export interface FactorChangeCase {
  name: string;
  enrolled: SecondFactor[];
  amr: Amr[];
  /** Seconds since the session authenticated. */
  age: number;
  /** Adding a factor, or removing or replacing one (default: add). */
  change?: 'add' | 'change';
  /** Whether the account's address is proven (default yes). */
  emailVerified?: boolean;
  expected: FactorChangeRefusal | null;
}

export const FACTOR_CHANGE_CASES: FactorChangeCase[] = [
  { name: 'no factor yet: a password session may add one', enrolled: [], amr: ['pwd'], age: 86_400, expected: null },
  { name: 'factor, password-only session', enrolled: ['totp'], amr: ['pwd'], age: 10, expected: 'needs_second_factor' },
  { name: 'factor, fresh two-factor session', enrolled: ['totp', 'recovery_code'], amr: ['pwd', 'otp', 'mfa'], age: 60, expected: null },
  { name: 'factor, fresh passkey session', enrolled: ['passkey'], amr: ['hwk'], age: 900, expected: null },
  { name: 'factor, two-factor session 15 min + 1 s old', enrolled: ['totp'], amr: ['pwd', 'otp', 'mfa'], age: 901, expected: 'needs_fresh_sign_in' },
  { name: 'factor, magic-link session', enrolled: ['passkey'], amr: ['email'], age: 5, expected: 'needs_second_factor' },
  { name: 'address not proven: nothing may be added', enrolled: [], amr: ['pwd'], age: 5, emailVerified: false, expected: 'email_unverified' },
  { name: 'address not proven, even from a fresh two-factor session', enrolled: ['totp'], amr: ['pwd', 'otp', 'mfa'], age: 5, emailVerified: false, expected: 'email_unverified' },
  { name: 'address not proven: removing a factor follows the factor rule', enrolled: ['totp'], amr: ['pwd', 'otp', 'mfa'], age: 5, change: 'change', emailVerified: false, expected: null },
  { name: 'address not proven, removal from a password session', enrolled: ['totp'], amr: ['pwd'], age: 5, change: 'change', emailVerified: false, expected: 'needs_second_factor' },
];

export interface CodeBasisCase {
  name: string;
  userStatus: 'active' | 'disabled';
  membership: 'none' | 'active' | 'blocked';
  /** The scope the code was issued for. */
  scope: string;
  /** What the user has consented to for the app at redemption ('' when nothing). */
  consentedScope: string;
  /** When the password last changed, in seconds relative to the code's issuance; null when never. */
  passwordChangedOffset: number | null;
  expected: SignInRefusal | 'consent_revoked' | 'password_changed' | null;
}

export const CODE_BASIS_CASES: CodeBasisCase[] = [
  { name: 'everything as issued', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: ALL, passwordChangedOffset: null, expected: null },
  { name: 'no membership row yet', userStatus: 'active', membership: 'none', scope: ALL, consentedScope: ALL, passwordChangedOffset: null, expected: null },
  { name: 'consent wider than the code', userStatus: 'active', membership: 'active', scope: 'openid', consentedScope: ALL, passwordChangedOffset: null, expected: null },
  { name: 'consent withdrawn', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: '', passwordChangedOffset: null, expected: 'consent_revoked' },
  { name: 'consent narrower than the code', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: 'openid profile', passwordChangedOffset: null, expected: 'consent_revoked' },
  { name: 'password changed before issuance', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: ALL, passwordChangedOffset: -60, expected: null },
  { name: 'password changed in the second of issuance', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: ALL, passwordChangedOffset: 0, expected: null },
  { name: 'password changed one second after issuance', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: ALL, passwordChangedOffset: 1, expected: 'password_changed' },
  { name: 'password changed well after issuance', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: ALL, passwordChangedOffset: 3600, expected: 'password_changed' },
  { name: 'user disabled since', userStatus: 'disabled', membership: 'active', scope: ALL, consentedScope: ALL, passwordChangedOffset: null, expected: 'user_disabled' },
  { name: 'user blocked for the app since', userStatus: 'active', membership: 'blocked', scope: ALL, consentedScope: ALL, passwordChangedOffset: null, expected: 'user_blocked' },
  { name: 'disabled and blocked: disabled wins', userStatus: 'disabled', membership: 'blocked', scope: ALL, consentedScope: ALL, passwordChangedOffset: null, expected: 'user_disabled' },
  { name: 'blocked beats consent withdrawn', userStatus: 'active', membership: 'blocked', scope: ALL, consentedScope: '', passwordChangedOffset: 5, expected: 'user_blocked' },
  { name: 'consent withdrawn beats password changed', userStatus: 'active', membership: 'active', scope: ALL, consentedScope: '', passwordChangedOffset: 5, expected: 'consent_revoked' },
];

export interface ReauthenticationCase {
  name: string;
  promptLogin: boolean;
  maxAge?: number;
  /** Seconds since the user last authenticated. */
  sinceAuth: number;
  expected: boolean;
}

export const REAUTHENTICATION_CASES: ReauthenticationCase[] = [
  { name: 'no demand', promptLogin: false, sinceAuth: 86_400, expected: false },
  { name: 'prompt=login, just signed in', promptLogin: true, sinceAuth: 0, expected: true },
  { name: 'max_age not yet reached', promptLogin: false, maxAge: 60, sinceAuth: 59, expected: false },
  { name: 'max_age exactly reached', promptLogin: false, maxAge: 60, sinceAuth: 60, expected: false },
  { name: 'max_age exceeded by a second', promptLogin: false, maxAge: 60, sinceAuth: 61, expected: true },
  { name: 'max_age=1 two seconds after sign-in', promptLogin: false, maxAge: 1, sinceAuth: 2, expected: true },
  { name: 'max_age=0 is prompt=login, even in the same second', promptLogin: false, maxAge: 0, sinceAuth: 0, expected: true },
  { name: 'prompt=login wins over a fresh enough max_age', promptLogin: true, maxAge: 3600, sinceAuth: 5, expected: true },
];
