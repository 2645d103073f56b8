/**
 * Loopback hosts (RFC 8252 §7.3, §8.3): the only hosts that may be reached over plain http, for
 * redirect URIs, CORS origins and the provider issuer (docs/reference/rest-api.md#developers, docs/guides/identity-provider.md#configuration).
 */
export const LOOPBACK_HOSTS: ReadonlySet<string> = new Set(['127.0.0.1', '[::1]', 'localhost']);

/** `hostname` as WHATWG URL reports it (IPv6 in brackets). */
export const isLoopbackHost = (hostname: string): boolean => LOOPBACK_HOSTS.has(hostname);

/** A peer address on this machine (`request.ip`: IPv4, IPv6, or IPv4 mapped into IPv6). */
export const isLoopbackAddress = (ip: string): boolean => ip === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(ip);

/**
 * A development server on this machine, asked from this machine: never in production, only with a
 * loopback BASE_URL, and only for a loopback peer (so a server exposed by mistake offers others nothing).
 * The console's one-click developer door and its hints open only here.
 */
export function isLocalDevelopment(config: { production: boolean; baseUrl: string }, peer: string): boolean {
  return !config.production && isLoopbackHost(new URL(config.baseUrl).hostname) && isLoopbackAddress(peer);
}

/** True for an absolute https URL, or an http URL on a loopback host. */
export function isHttpsOrLoopback(url: string): boolean {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  return parsed.protocol === 'https:' || (parsed.protocol === 'http:' && isLoopbackHost(parsed.hostname));
}
