import type { Amr } from './acr.js';

/**
 * Page state of an authorization request in flight, kept server-side in the browser session's `data`
 * (never in a form or a URL the user can edit):
 * - `resume`: the same-origin path `/oauth/authorize?<query>` (or `/device/continue?client_id=…`) that every
 *   sign-in page (login, register, magic link, provider sign-in) returns to with a 303 when it is done;
 * - `consent` / `profile`: the step `/oauth/authorize` is waiting for, with what the page must show.
 */

export interface PendingConsent {
  appId: string;
  userId: string;
  /** The exact scopes shown on the page, and the only ones Allow grants. */
  scope: string;
  redirectUri: string;
  state?: string;
  /** Where to go after Allow. */
  resume: string;
  /** The user was identified by a `session` JWT rather than the browser session. */
  viaSessionJwt: boolean;
}

export interface PendingProfile {
  appId: string;
  userId: string;
  fields: string[];
  resume: string;
  viaSessionJwt: boolean;
}

/**
 * A first factor checked on a hosted page, or a signed-in session an app wants a second factor for:
 * the `/mfa` page asks for it. The browser session is signed in (as this user, with the new `amr`)
 * only once it is given.
 */
export interface PendingMfa {
  userId: string;
  amr: Amr[];
  /** The first factor's method (events), or 'step_up' for a session that was already signed in. */
  method: string;
  via: string;
  /** When the first factor was checked: the second must follow within PENDING_MFA_SECONDS. */
  since: number;
  /** Asked by the account page to change second factors: the factor is asked even though the session has one. */
  stepUp?: boolean;
  /** A sign-in started on the account page goes back there; a registration goes on to confirm its address. */
  returnTo?: '/account' | '/account?bind=1' | '/verify-email?after=register';
}

/** How long a checked first factor waits for its second. */
export const PENDING_MFA_SECONDS = 600;

/** The `method` of a pending second step asked of a session that was already signed in. */
export const STEP_UP = 'step_up';

/** The pending second step of a first factor a hosted door checked: the one shape every door stores. */
export function pendingMfa(
  userId: string,
  factor: { method: string; amr: readonly Amr[] },
  input: { via: string; since: number; returnTo?: PendingMfa['returnTo']; stepUp?: boolean },
): PendingMfa {
  return { userId, amr: [...factor.amr], method: factor.method, ...input };
}

/** The pending second step of a browser, while it is fresh. */
export function livePendingMfa(flow: FlowState, now: number): PendingMfa | undefined {
  const pending = flow.mfa;
  return pending && now - pending.since <= PENDING_MFA_SECONDS ? pending : undefined;
}

export interface FlowState {
  resume?: string;
  /** `resume` again when it continues a pushed authorization request (RFC 9126): `/oauth/authorize` then accepts it for an app that requires PAR. */
  pushedResume?: string;
  consent?: PendingConsent;
  profile?: PendingProfile;
  mfa?: PendingMfa;
  [key: string]: unknown;
}

/**
 * Only `/oauth/authorize?…` and the device page's `/device/continue?…` (docs/guides/device-sign-in.md) are
 * ever resumed: never an absolute or protocol-relative URL.
 */
export function isSafeResume(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 8192 && /^\/(oauth\/authorize|device\/continue)\?[^\\#\s]*$/.test(value);
}
