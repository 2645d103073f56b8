import { AppError } from '../errors.js';

/**
 * Resource indicators (RFC 8707, docs/reference/oauth.md#resource-indicators-rfc-8707): the APIs an app
 * declares, the `resource` parameter of a request, and the `aud` of the access token they give.
 */

/** Where Gatehouse publishes the metadata of its own resource endpoints (RFC 9728 §3; its resource identifier is BASE_URL). */
export const PROTECTED_RESOURCE_PATH = '/.well-known/oauth-protected-resource';

/** The most resource URIs an app declares, and a request names. */
export const MAX_RESOURCES = 20;
export const MAX_RESOURCE_URI = 2000;

/**
 * Why `value` cannot be a resource URI (RFC 8707 §2: absolute, no fragment), or null when it can. https
 * only in production; no credentials, no whitespace (a request's resources travel space-separated).
 */
export function resourceUriProblem(value: string, production: boolean): string | null {
  if (value.length > MAX_RESOURCE_URI) return `must be at most ${MAX_RESOURCE_URI} characters`;
  if (/\s/.test(value) || !URL.canParse(value)) return 'must be an absolute URI';
  if (value.includes('#')) return 'must not contain a fragment';
  const url = new URL(value);
  if (url.protocol !== 'https:' && (production || url.protocol !== 'http:')) return production ? 'must be an https URI' : 'must be an http or https URI';
  if (url.username || url.password) return 'must not contain credentials';
  return null;
}

/** A request's `resource` values (a repeated form or query key arrives as an array) as one space-separated string; undefined when absent. */
export function joinedResourceParam(value: unknown): string | undefined {
  if (value === undefined) return undefined;
  const values = Array.isArray(value) ? value : [value];
  return values.every((v) => typeof v === 'string') ? values.join(' ') : undefined;
}

/** The resources of a space-separated list (as stored with codes and grants), de-duplicated, in order. */
export const resourceList = (joined: string | null | undefined): string[] => [...new Set((joined ?? '').split(' ').filter(Boolean))];

/**
 * Which of `requested` the app may not name: those neither among the app's declared resources nor
 * Gatehouse's own resource identifier (`own`, the issuer: its own endpoints).
 */
export function unallowedResources(requested: readonly string[], declared: readonly string[], own: string): string[] {
  return requested.filter((resource) => resource !== own && !declared.includes(resource));
}

/**
 * RFC 8707 §2.2: the resources a token request may have (`asked`, space-separated) out of those its
 * grant authorized (`authorized`, as stored): all authorized when none is asked; a resource not
 * authorized, or no longer declared by the app (`declared`, or Gatehouse's own `own`), is `invalid_target`.
 */
export function narrowedAudience(asked: string | undefined, authorized: string | null, declared: readonly string[], own: string): string[] {
  const requested = resourceList(asked);
  const allowed = resourceList(authorized);
  const outside = requested.filter((resource) => !allowed.includes(resource));
  if (outside.length) throw new AppError('invalid_target', { message: 'A requested resource was not authorized for this grant.', detail: 'resource not authorized' });
  const audience = requested.length ? requested : allowed;
  if (unallowedResources(audience, declared, own).length) throw new AppError('invalid_target', { message: 'A resource of this grant is no longer declared by the application.', detail: 'resource no longer declared' });
  return audience;
}

/** `aud` of an access token for `resources` (RFC 9068 §3): one string for one, an array for several. */
export const audienceOf = (resources: readonly string[]): string | string[] => (resources.length === 1 ? resources[0]! : [...resources]);

/**
 * Whether an access token's `aud` lets Gatehouse's own endpoints accept it: the app's own audience (a
 * token for no resource), or one that names Gatehouse's resource identifier `own` (docs/reference/oauth.md#resource-indicators-rfc-8707).
 */
export function audienceIncludesUs(aud: unknown, clientId: string, own: string): boolean {
  if (aud === clientId || aud === own) return true;
  return Array.isArray(aud) && aud.includes(own);
}
