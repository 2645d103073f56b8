/** Scopes of docs/reference/tokens.md#scopes. */
export const SUPPORTED_SCOPES = ['openid', 'profile', 'email', 'offline_access'] as const;
export const DEFAULT_SCOPE = 'openid profile email';

/** Splits a scope string into a sorted, de-duplicated list. */
export function scopeList(scope: string): string[] {
  return [...new Set(scope.split(' ').filter(Boolean))].sort();
}

export const joinScope = (scopes: string[]): string => scopeList(scopes.join(' ')).join(' ');

/** The unknown scopes in a request (empty when every scope is supported). */
export function unknownScopes(scope: string): string[] {
  return scopeList(scope).filter((s) => !(SUPPORTED_SCOPES as readonly string[]).includes(s));
}

/** True when every scope of `requested` is in `granted`. */
export function isSubsetScope(requested: string, granted: string): boolean {
  const have = new Set(scopeList(granted));
  return scopeList(requested).every((s) => have.has(s));
}

export const hasScope = (scope: string, name: string): boolean => scopeList(scope).includes(name);
