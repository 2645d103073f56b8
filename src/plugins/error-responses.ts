import type { FastifyInstance, RouteOptions } from 'fastify';
import fp from 'fastify-plugin';
import { ErrorBody, type ErrorStatuses, type Headers, HtmlPage, OAuthErrorBody } from '../shared/responses.js';
import { type ErrorStyle, OAUTH_NAMES } from './error-handler.js';
import type { ErrorCode } from '../errors.js';

/**
 * Completes every route's response schema with its error responses, in the route's error style
 * (the shape plugins/error-handler.ts sends): the codes the route names in `schema.errors`, plus
 * those any route of its kind can answer —
 * - a method with a body: `invalid_json` / `invalid_request` (400), `payload_too_large` (413),
 *   `unsupported_media_type` (415);
 * - a route with an input schema: `invalid_request` (400);
 * - every route: `internal_error` (500) and `service_unavailable` (503), as the `default` response.
 * Being the response schema, each also serializes its error bodies: nothing beyond the shared body leaves.
 * CORS preflights (OPTIONS) are protocol machinery, not operations: they are left out of the document.
 * Registered before any route.
 */

const BODY_METHODS = new Set(['POST', 'PUT', 'PATCH']);

const STATUS_TEXT: Record<number, string> = {
  400: 'Bad request',
  401: 'Not authenticated',
  403: 'Not allowed',
  404: 'Not found',
  409: 'Conflict',
  412: 'Precondition failed',
  413: 'Payload too large',
  415: 'Unsupported media type',
  429: 'Too many requests',
  502: 'Bad gateway',
  503: 'Service unavailable',
};

const retryAfter: Headers = { 'Retry-After': { description: 'Seconds to wait before retrying.', type: 'integer', minimum: 1 } };
const wwwAuthenticate: Headers = { 'WWW-Authenticate': { description: 'The authentication scheme and error (RFC 6750 §3, RFC 7617).', type: 'string' } };

function errorResponse(style: ErrorStyle, status: number | 'default', codes: string[]) {
  const names = style === 'oauth' ? [...new Set(codes.map((code) => OAUTH_NAMES[code as ErrorCode] ?? code))] : codes;
  const list = names.map((name) => `\`${name}\``).join(', ');
  const what = status === 'default' ? `Server error (500 \`${names[0]}\`, 503 \`${names[1]}\` with Retry-After)` : `${STATUS_TEXT[status] ?? 'Error'}: ${list}`;
  const retries = status === 429 || status === 'default' || codes.includes('service_unavailable');
  const headers = retries ? retryAfter : status === 401 && style !== 'html' ? wwwAuthenticate : undefined;
  // A page's own refusals (a form's 429 or 503, rendered again) carry the header; its default says so in words.
  const pageHeaders = retries && status !== 'default' ? { headers } : {};
  if (style === 'html') return { description: `${what}; an HTML error page.`, ...pageHeaders, content: { 'text/html': { schema: HtmlPage } } };
  const schema = style === 'oauth' ? OAuthErrorBody : ErrorBody;
  return { description: `${what}.`, ...(headers ? { headers } : {}), content: { 'application/json': { schema } } };
}

export function completeErrorResponses(route: RouteOptions): void {
  const methods = [route.method].flat();
  const schema = route.schema!;
  const style = route.config?.errorStyle ?? 'json';
  const codes = new Map<number, string[]>();
  const add = (status: number, ...more: string[]) => codes.set(status, [...new Set([...(codes.get(status) ?? []), ...more])]);
  for (const [status, named] of Object.entries(schema.errors ?? ({} as ErrorStatuses))) add(Number(status), ...(named ?? []));
  if (methods.some((method) => BODY_METHODS.has(method))) {
    add(400, 'invalid_request', 'invalid_json');
    add(413, 'payload_too_large');
    add(415, 'unsupported_media_type');
  }
  if (schema.body || schema.querystring || schema.params || schema.headers) add(400, 'invalid_request');

  const response = (schema.response ??= {}) as Record<string, unknown>;
  for (const [status, named] of [...codes].sort(([a], [b]) => a - b)) response[status] ??= errorResponse(style, status, named);
  response.default ??= errorResponse(style, 'default', ['internal_error', 'service_unavailable']);
}

async function errorResponsesPlugin(app: FastifyInstance) {
  // Scopes add their own onRoute hooks (the hosted pages set `errorStyle: 'html'` there), and a child's
  // hooks run after this root one. Fastify runs a route's onRoute hooks synchronously and compiles its
  // schemas only once the registering plugin has finished, so completing on the next microtask sees
  // the route as every hook left it and still comes before compilation.
  app.addHook('onRoute', (route) => {
    const methods = [route.method].flat();
    // An automatic HEAD route shares its GET route's schema, which the GET completes.
    if (methods.includes('HEAD')) return;
    if (methods.includes('OPTIONS')) {
      route.schema = { ...route.schema, hide: true };
      return;
    }
    // Now, not on the microtask: Fastify takes the schema object for the route's context right after the hooks.
    route.schema ??= {};
    queueMicrotask(() => completeErrorResponses(route));
  });
}

export default fp(errorResponsesPlugin, { name: 'error-responses' });
