import { isHttpsOrLoopback } from './loopback.js';

/**
 * CORS for single-page apps (docs/reference/rest-api.md#cors). An origin is allowed when it is the origin of
 * one of the app's http(s) redirect URIs or one of its `allowed_origins`; where a request names no app
 * (JWKS, discovery, preflights), the origins of all apps. Matching is exact string equality against
 * the browser's `Origin` header; credentials are never allowed, so `*` never appears.
 */

export const CORS_ALLOWED_METHODS = 'GET, POST, PUT, DELETE';
export const CORS_ALLOWED_HEADERS = 'Authorization, Content-Type, X-Client-Id, If-Match, DPoP';
/** Response headers a script may read: profile ETags, throttling, bearer-error details and DPoP nonces. */
export const CORS_EXPOSED_HEADERS = 'ETag, Retry-After, WWW-Authenticate, DPoP-Nonce';
const PREFLIGHT_MAX_AGE_SECONDS = '600';

/** The fields of an app that decide its CORS origins. */
export interface CorsApp {
  redirectUris: readonly string[];
  allowedOrigins: readonly string[];
  disabled?: boolean;
}

/** The serialized origin (`scheme://host[:port]`) of an http(s) URI; null for other schemes. */
export function originOf(uri: string): string | null {
  try {
    const url = new URL(uri);
    return url.protocol === 'https:' || url.protocol === 'http:' ? url.origin : null;
  } catch {
    return null;
  }
}

/** True when `value` is exactly an http(s) origin (no path, query or credentials) that an app may list. */
export function isValidOrigin(value: string): boolean {
  return isHttpsOrLoopback(value) && originOf(value) === value;
}

/** Origins allowed for one app. Disabled apps allow none. */
export function originsOfApp(app: CorsApp): string[] {
  if (app.disabled) return [];
  const fromRedirects = app.redirectUris.map(originOf).filter((o): o is string => o !== null);
  return [...new Set([...fromRedirects, ...app.allowedOrigins])];
}

/** Origins allowed where the request names no app: those of every app. */
export function originsOfApps(apps: readonly CorsApp[]): Set<string> {
  return new Set(apps.flatMap(originsOfApp));
}

/**
 * Response headers for a request carrying `Origin: origin`. `Vary: Origin` is always set because the
 * answer depends on it (shared caches); the allow headers only for an allowed origin.
 */
export function corsHeadersFor(
  origin: string | undefined,
  allowedOrigins: ReadonlySet<string> | readonly string[],
  kind: 'actual' | 'preflight' = 'actual',
): Record<string, string> {
  const headers: Record<string, string> = { vary: 'Origin' };
  const allowed = origin !== undefined && ('has' in allowedOrigins ? allowedOrigins.has(origin) : allowedOrigins.includes(origin));
  if (!allowed) return headers;
  headers['access-control-allow-origin'] = origin;
  if (kind === 'preflight') {
    headers['access-control-allow-methods'] = CORS_ALLOWED_METHODS;
    headers['access-control-allow-headers'] = CORS_ALLOWED_HEADERS;
    headers['access-control-max-age'] = PREFLIGHT_MAX_AGE_SECONDS;
  } else {
    headers['access-control-expose-headers'] = CORS_EXPOSED_HEADERS;
  }
  return headers;
}
