import { isIP } from 'node:net';

/**
 * The coarse area of an address, as the sessions list shows it and grants and browser sessions store
 * it (docs/account/sessions.md): IPv4 /24 (`203.0.113.x`), IPv6 /48 (`2001:db8:1::/48`); an
 * IPv4-mapped IPv6 address as IPv4. Never the full address. Null when there is none or it is no address.
 */
export function ipArea(ip: string | null | undefined): string | null {
  if (!ip) return null;
  let address = ip.trim();
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) address = mapped[1]!;
  const zone = address.indexOf('%');
  if (zone >= 0) address = address.slice(0, zone);
  const kind = isIP(address);
  if (kind === 4) return `${address.split('.').slice(0, 3).join('.')}.x`;
  if (kind === 6) return `${ipv6Groups(address).slice(0, 3).map((g) => g.replace(/^0+(?=.)/, '')).join(':')}::/48`;
  return null;
}

/** The eight groups of an IPv6 address (`::` expanded, lower case; an embedded IPv4 tail as two groups). */
function ipv6Groups(address: string): string[] {
  let text = address.toLowerCase();
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = text.slice(0, v4.index) + `${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head, tail] = text.includes('::') ? text.split('::') as [string, string] : [text, undefined];
  const left = head ? head.split(':') : [];
  if (tail === undefined) return left;
  const right = tail ? tail.split(':') : [];
  return [...left, ...Array<string>(8 - left.length - right.length).fill('0'), ...right];
}

/** A user agent as stored beside a session (at most 512 characters, as events keep it). */
export const storedUserAgent = (userAgent: string | null | undefined): string | null => (userAgent ? userAgent.slice(0, 512) : null);

/** Where a session or grant was created from, as stored beside it (user agent, coarse address area). */
export interface Device {
  userAgent: string | null;
  ipArea: string | null;
}

export const deviceOf = (ctx: { ip?: string | null; userAgent?: string | null }): Device => ({ userAgent: storedUserAgent(ctx.userAgent), ipArea: ipArea(ctx.ip) });
