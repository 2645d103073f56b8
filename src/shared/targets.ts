import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

/**
 * Where a webhook may be sent (docs/webhooks.md, "SSRF"; the same rules hold for back-channel logout URIs, docs/guides/back-channel-logout.md). With `publicOnly` (always in production): only
 * https URLs, and only to public unicast addresses — never loopback, private, link-local (the cloud
 * metadata address 169.254.169.254 among them), unique-local, carrier-grade NAT, multicast, unspecified,
 * reserved or documentation ranges, nor an IPv6 address that embeds an IPv4 one (mapped, 6to4, NAT64,
 * Teredo). The address is checked when the connection is made, on every address the name resolves to,
 * so a name that resolves elsewhere between a check and the request (DNS rebinding) gains nothing.
 */

export interface TargetPolicy {
  /** Refuse http and non-public addresses (production; WEBHOOK_ALLOW_PRIVATE=0). */
  publicOnly: boolean;
}

/** Why a target is refused; the message is shown to the developer in the delivery log. */
export class TargetRefused extends Error {
  override readonly name = 'TargetRefused';
}

/** Whether an IP address is a public unicast one (ipaddr.js names every special range; only `unicast` is public). */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  const parsed = ipaddr.parse(address);
  if (parsed.kind() === 'ipv6' && (parsed as ipaddr.IPv6).isIPv4MappedAddress()) return isPublicAddress((parsed as ipaddr.IPv6).toIPv4Address().toString());
  return parsed.range() === 'unicast';
}

/** Checks a URL's form (not its addresses): a message for the developer, or null when it may be used. */
export function urlProblem(value: string, policy: TargetPolicy): string | null {
  if (!URL.canParse(value)) return 'must be an absolute URL';
  const url = new URL(value);
  if (url.protocol !== 'https:' && url.protocol !== 'http:') return 'must be an https URL';
  if (policy.publicOnly && url.protocol !== 'https:') return 'must be an https URL';
  if (url.username || url.password) return 'must not contain credentials';
  if (url.hash) return 'must not contain a fragment';
  if (!url.hostname) return 'must name a host';
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (policy.publicOnly && isIP(host) && !isPublicAddress(host)) return 'must be a public address';
  if (policy.publicOnly && (host === 'localhost' || host.endsWith('.localhost'))) return 'must be a public address';
  return null;
}

type LookupCallback = (error: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void;

/**
 * A `lookup` for http(s).request: resolves the name as Node would, and refuses the connection when any
 * address it resolves to is not public. Node calls it only for names: an IP literal is checked by
 * `urlProblem` before the request.
 */
export function publicOnlyLookup(hostname: string, options: LookupOptions, callback: LookupCallback): void {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses) => {
    if (error) return callback(error, []);
    const list = addresses as LookupAddress[];
    const refused = list.find((entry) => !isPublicAddress(entry.address));
    if (refused || list.length === 0) return callback(new TargetRefused(`${hostname} resolves to a non-public address`) as NodeJS.ErrnoException, []);
    if (options.all) return callback(null, list);
    return callback(null, list[0]!.address, list[0]!.family);
  });
}
