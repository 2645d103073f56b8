import { isIP } from 'node:net';

/**
 * The WebAuthn relying party Gatehouse is, derived from AUTH_URL (where the hosted pages live): its
 * hostname is the RP ID and its origin the expected origin. Browsers refuse WebAuthn where the RP ID
 * would be an IP address, and outside a secure context (https, or http on localhost): then passkeys
 * are off, with the reason.
 */
export type RelyingParty = { enabled: true; id: string; origin: string; name: string } | { enabled: false; reason: string };

const RP_NAME = 'Gatehouse';

const isLocalhost = (hostname: string) => hostname === 'localhost' || hostname.endsWith('.localhost');

export function relyingPartyOf(authUrl: string): RelyingParty {
  const url = new URL(authUrl);
  const hostname = url.hostname;
  if (isIP(hostname.replace(/^\[|\]$/g, '')) !== 0) {
    return { enabled: false, reason: `AUTH_URL's host ${hostname} is an IP address; browsers allow passkeys (WebAuthn) only on a domain name such as localhost` };
  }
  if (url.protocol !== 'https:' && !isLocalhost(hostname)) {
    return { enabled: false, reason: `AUTH_URL ${url.origin} is not https; browsers allow passkeys (WebAuthn) only on https or on localhost` };
  }
  return { enabled: true, id: hostname, origin: url.origin, name: RP_NAME };
}
