/**
 * Page state of an authorization request in flight, kept server-side in the browser session's `data`
 * (never in a form or a URL the user can edit):
 * - `resume`: the same-origin path `/oauth/authorize?<query>` that every sign-in page (login, register,
 *   magic link, provider sign-in) returns to with a 303 when it is done;
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

export interface FlowState {
  resume?: string;
  consent?: PendingConsent;
  profile?: PendingProfile;
  [key: string]: unknown;
}

/** Only `/oauth/authorize?…` paths are ever resumed: never an absolute or protocol-relative URL. */
export function isSafeResume(value: unknown): value is string {
  return typeof value === 'string' && value.length <= 8192 && /^\/oauth\/authorize\?[^\\#\s]*$/.test(value);
}
