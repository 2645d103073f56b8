import { AppError } from '../errors.js';

/**
 * The one redirect-URI matching rule (RFC 6749 §3.1.2.3 as OAuth 2.1 and RFC 9700 §2.1 tighten it;
 * docs/security/checklist.md#redirect-uris-and-open-redirects): a redirect_uri is accepted only when it equals a registered value exactly,
 * character for character, with no normalisation (no case folding, default ports, trailing slashes or
 * loopback port leniency). Registration (src/dev/redirect-uris.ts) makes sure registered values are
 * canonical, so exact equality is also what a browser will send back.
 */
export function isRegisteredRedirectUri(registered: readonly string[], uri: string): boolean {
  return registered.includes(uri);
}

/** How a refused redirect_uri differs from a registered one; `spelling`: the same URL written differently. */
export type RedirectUriDifference = 'scheme' | 'host' | 'port' | 'path' | 'trailing_slash' | 'query' | 'spelling';

function parts(uri: string): { scheme: string; host: string; port: string; path: string; query: string } | undefined {
  try {
    const u = new URL(uri);
    return { scheme: u.protocol, host: u.hostname, port: u.port, path: u.pathname, query: u.search };
  } catch {
    return undefined;
  }
}

/** The components in which `uri` differs from `registered` ([] when equal); undefined when either is not a URL. */
export function redirectUriDifferences(registered: string, uri: string): RedirectUriDifference[] | undefined {
  if (registered === uri) return [];
  const a = parts(registered);
  const b = parts(uri);
  if (!a || !b) return undefined;
  const differences: RedirectUriDifference[] = [];
  if (a.scheme !== b.scheme) differences.push('scheme');
  if (a.host !== b.host) differences.push('host');
  if (a.port !== b.port) differences.push('port');
  if (a.path !== b.path) differences.push(a.path.replace(/\/$/, '') === b.path.replace(/\/$/, '') ? 'trailing_slash' : 'path');
  if (a.query !== b.query) differences.push('query');
  return differences.length ? differences : ['spelling'];
}

/** Differences beyond which a registered value is unrelated to the refused one, not a near miss. */
const MAX_NEAR_DIFFERENCES = 2;

/** The registered value a refused redirect_uri nearly matches (fewest differences, first on a tie), for a developer hint. */
export function nearestRegisteredRedirectUri(registered: readonly string[], uri: string): { uri: string; differences: RedirectUriDifference[] } | undefined {
  let best: { uri: string; differences: RedirectUriDifference[] } | undefined;
  for (const candidate of registered) {
    const differences = redirectUriDifferences(candidate, uri);
    if (!differences || differences.length > MAX_NEAR_DIFFERENCES) continue;
    if (!best || differences.length < best.differences.length) best = { uri: candidate, differences };
  }
  return best;
}

/**
 * The refusal of an unregistered redirect_uri. The hosted error page echoes the refused value (escaped):
 * it is what the requester itself sent, so showing it reveals nothing. Outside production the page also
 * names the registered value it nearly matches; production never shows an app's registered URIs.
 */
export function unregisteredRedirectUri(registered: readonly string[], uri: string, options: { production: boolean; message?: string }): AppError {
  const nearest = options.production ? undefined : nearestRegisteredRedirectUri(registered, uri);
  return new AppError('invalid_redirect_uri', {
    message: options.message,
    reason: 'redirect_uri_not_registered',
    extra: { redirect_uri: uri, ...(nearest ? { nearest_redirect_uri: nearest.uri, differences: nearest.differences } : {}) },
  });
}

/** What the hosted error page shows about a refused redirect_uri: the value, and outside production its near match. */
export interface RefusedRedirectUri {
  value: string;
  nearest?: string;
  differences: RedirectUriDifference[];
}

/** The refused redirect_uri an error from `unregisteredRedirectUri` carries; undefined for any other error. */
export function refusedRedirectUri(error: AppError): RefusedRedirectUri | undefined {
  const extra = error.extra ?? {};
  if (error.reason !== 'redirect_uri_not_registered' || typeof extra.redirect_uri !== 'string') return undefined;
  return {
    value: extra.redirect_uri,
    nearest: typeof extra.nearest_redirect_uri === 'string' ? extra.nearest_redirect_uri : undefined,
    differences: Array.isArray(extra.differences) ? (extra.differences as RedirectUriDifference[]) : [],
  };
}
