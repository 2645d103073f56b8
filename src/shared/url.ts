/**
 * Appends query parameters to a registered redirect URI by string concatenation, so the registered
 * URI (including its own query, RFC 6749 §3.1.2) is kept byte for byte. Registered URIs never have
 * a fragment (redirect-uri rules), so appending is always correct.
 */
export function appendQuery(uri: string, params: Record<string, string | undefined>): string {
  const query = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined) query.append(k, v);
  const qs = query.toString();
  if (!qs) return uri;
  return `${uri}${uri.includes('?') ? (uri.endsWith('?') || uri.endsWith('&') ? '' : '&') : '?'}${qs}`;
}
