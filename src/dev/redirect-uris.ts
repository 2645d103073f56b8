import { isLoopbackHost } from '../shared/loopback.js';

/**
 * Redirect-URI rules on write (docs/reference/rest-api.md#developers, docs/security/checklist.md#redirect-uris-and-open-redirects). Authorization requests compare
 * redirect URIs as exact strings, so a registered URI must already be unambiguous: absolute, in
 * canonical form, no fragment, no wildcard, no credentials; `https:`, `http:` only for loopback hosts,
 * or a private-use scheme `<scheme>:/<path>` / `<scheme>://<path>` (RFC 8252 §7.1) that is not a
 * script- or document-carrying scheme.
 */

export const MAX_REDIRECT_URIS = 20;
export const MAX_REDIRECT_URI_LENGTH = 2000;

/** Schemes that can run script, read local files or carry inline documents, or are not app callbacks. */
const FORBIDDEN_SCHEMES = new Set(['javascript', 'data', 'file', 'vbscript', 'about', 'blob', 'filesystem', 'view-source', 'ws', 'wss', 'ftp']);

// RFC 3986 §2: unreserved, reserved and '%'. Anything else (space, controls, '\', '<', '"', non-ASCII…) is refused.
const URI_CHARACTERS = /^[A-Za-z0-9\-._~:/?#[\]@!$&'()*+,;=%]*$/;
const BAD_PERCENT_ENCODING = /%(?![0-9A-Fa-f]{2})/;
const SCHEME = /^([A-Za-z][A-Za-z0-9+.-]*):/;
// Dot segments (also percent-encoded) would be resolved by a browser, so the URI would not be what it says.
const DOT_SEGMENT = /(^|\/)(\.|%2e){1,2}(\/|\?|$)/i;

export type RedirectUriCheck = { ok: true } | { ok: false; reason: string };

export interface RedirectUriProblem {
  /** Index of the offending entry; null for a problem with the list as a whole. */
  index: number | null;
  message: string;
}

const refuse = (reason: string): RedirectUriCheck => ({ ok: false, reason });

/** Checks one redirect URI against the registration rules. */
export function checkRedirectUri(uri: string): RedirectUriCheck {
  if (uri.length === 0) return refuse('must not be empty');
  if (uri.length > MAX_REDIRECT_URI_LENGTH) return refuse(`must be at most ${MAX_REDIRECT_URI_LENGTH} characters`);
  const scheme = SCHEME.exec(uri)?.[1];
  if (scheme && FORBIDDEN_SCHEMES.has(scheme.toLowerCase())) return refuse(`the ${scheme.toLowerCase()}: scheme is not allowed`);
  if (/[\s\p{Cc}]/u.test(uri)) return refuse('must not contain whitespace or control characters');
  if (uri.includes('\\')) return refuse('must not contain backslashes');
  if (!URI_CHARACTERS.test(uri)) return refuse('contains characters that are not allowed in a URI (percent-encode them)');
  if (BAD_PERCENT_ENCODING.test(uri)) return refuse('has an invalid percent-encoding');
  if (uri.includes('#')) return refuse('must not contain a fragment (#)');
  if (uri.includes('*')) return refuse('must not contain wildcards (*)');

  if (!scheme) return refuse('must be an absolute URI with a scheme');
  if (scheme !== scheme.toLowerCase()) return refuse('scheme must be lowercase');

  const rest = uri.slice(scheme.length + 1);
  const authority = rest.startsWith('//') ? rest.slice(2).split(/[/?]/, 1)[0]! : null;
  if (authority?.includes('@')) return refuse('must not contain user credentials (userinfo)');
  const path = authority === null ? rest : rest.slice(2 + authority.length);
  if (DOT_SEGMENT.test(path.split('?', 1)[0]!)) return refuse('must not contain "." or ".." path segments');

  if (scheme === 'http' || scheme === 'https') return checkWebUri(uri, scheme, authority);
  if (!rest.startsWith('/') || rest.replace(/^\/+/, '') === '') return refuse('a custom scheme must be followed by a path: <scheme>:/<path> or <scheme>://<path>');
  return { ok: true };
}

function checkWebUri(uri: string, scheme: 'http' | 'https', authority: string | null): RedirectUriCheck {
  if (!authority) return refuse(`must be ${scheme}://<host>/<path>`);
  let url: URL;
  try {
    url = new URL(uri);
  } catch {
    return refuse('is not a valid URL');
  }
  // Exact matching means the registered host must be the one a browser will use: lowercase, no default port, canonical IP.
  if (authority !== url.host) return refuse(`host must be written in canonical form (${url.host})`);
  if (scheme === 'http' && !isLoopbackHost(url.hostname)) return refuse('http is only allowed for loopback hosts (127.0.0.1, [::1], localhost); use https');
  return { ok: true };
}

/** Checks a whole redirect-URI list: every entry, at most MAX_REDIRECT_URIS, no duplicates. */
export function validateRedirectUris(uris: readonly string[]): { ok: true } | { ok: false; problems: RedirectUriProblem[] } {
  const problems: RedirectUriProblem[] = [];
  if (uris.length > MAX_REDIRECT_URIS) problems.push({ index: null, message: `at most ${MAX_REDIRECT_URIS} redirect URIs are allowed` });
  const firstIndex = new Map<string, number>();
  uris.forEach((uri, index) => {
    const check = checkRedirectUri(uri);
    if (!check.ok) problems.push({ index, message: check.reason });
    const earlier = firstIndex.get(uri);
    if (earlier !== undefined) problems.push({ index, message: `duplicate of entry ${earlier}` });
    else firstIndex.set(uri, index);
  });
  return problems.length ? { ok: false, problems } : { ok: true };
}
