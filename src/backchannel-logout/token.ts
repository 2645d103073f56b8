import type { JWTPayload } from 'jose';

/**
 * The claims of a logout token (OpenID Connect Back-Channel Logout 1.0 §2.4; docs/guides/back-channel-logout.md),
 * besides `iss`, `iat` and `exp`, which the signer adds. Pure: the deliverer signs what this returns.
 */

export const BACKCHANNEL_LOGOUT_EVENT = 'http://schemas.openid.net/event/backchannel-logout';

/** A logout token lives this long: signed at each attempt, so a retry hours later is still fresh. */
export const LOGOUT_TOKEN_TTL = 120;

export interface LogoutSubject {
  /** The delivery's id: the same `jti` on every attempt, so a receiver can drop a repeat. */
  id: string;
  appId: string;
  userId: string;
  /** The ended session (the `sid` of the ID tokens it was issued); null: every session of the user at the app. */
  sid: string | null;
}

/** `sub` always (the user at every app is one id); `sid` when the ended sign-in has one; never a `nonce`. */
export function logoutClaims(subject: LogoutSubject): JWTPayload {
  return {
    aud: subject.appId,
    jti: subject.id,
    sub: subject.userId,
    ...(subject.sid ? { sid: subject.sid } : {}),
    events: { [BACKCHANNEL_LOGOUT_EVENT]: {} },
  };
}
