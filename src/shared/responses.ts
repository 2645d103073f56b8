import type { RouteOptions } from 'fastify';
import { z, type ZodType } from 'zod';
import { ERROR_CATALOGUE, type ErrorCode } from '../errors.js';

/**
 * Building blocks of route response schemas. Each response is written in Fastify's content form
 * (`{ description, content: { <media type>: { schema } } }`), which both serializes the answer
 * (plugins/validation.ts) and becomes the OpenAPI response. Error responses are not written by routes:
 * a route names the error codes it can answer in `schema.errors`, and plugins/error-responses.ts
 * turns them (plus the ones every route of its kind can answer) into responses with the shared bodies.
 */

/** The docs/reference/errors.md error body of `/v1/*`, `/oauth/idp/*` and every other JSON route. */
export const ErrorBody = z
  .object({
    code: z.enum(Object.keys(ERROR_CATALOGUE) as [ErrorCode, ...ErrorCode[]]).describe('Stable machine-readable code (docs/reference/errors.md).'),
    message: z.string().describe('Human-readable text; may change, do not match on it.'),
    details: z
      .array(z.object({ path: z.string().describe('Where: `body.email`, `querystring.page`, `headers.x-client-id`, …'), message: z.string() }))
      .optional()
      .describe('Validation issues, one per offending field.'),
    retry_after: z.number().int().optional().describe('With `rate_limited`: seconds until a retry can succeed (also the `Retry-After` header).'),
    attempts_left: z.number().int().optional().describe('With `invalid_code`: wrong tries left before the code is used up.'),
    hosted_url: z.string().optional().describe('With `idp_oauth_not_bound`: the hosted account page where the user binds the provider account.'),
    reason: z.string().optional().describe('With `weak_password`: which policy rule failed (`too_short`, `too_long`, `equals_email`, `character_classes`, `common`, `reused`; docs/guides/password-policy.md).'),
    max_age_days: z.number().int().optional().describe('With `password_expired`: the app\'s maximum password age in days.'),
    deletion_scheduled_at: z.string().optional().describe('With `account_deletion_scheduled`: when the account is purged (ISO 8601).'),
  })
  .meta({ id: 'Error', description: 'Error body (docs/reference/errors.md).' });

/** RFC 6749 §5.2 error body of `/oauth/token`, `/oauth/revoke`, `/oauth/introspect`, `/oauth/userinfo`. */
export const OAuthErrorBody = z
  .object({
    error: z.string().describe('RFC 6749 / 6750 / OIDC error code, e.g. `invalid_grant`.'),
    error_description: z.string(),
  })
  .meta({ id: 'OAuthError', description: 'OAuth error body (RFC 6749 §5.2).' });

/** A server-rendered HTML page (hosted pages, HTML error pages). */
export const HtmlPage = z.string().meta({ id: 'HtmlPage', description: 'A server-rendered HTML page.' });

/** Error codes a route answers, by status: the codes of docs/reference/errors.md, or RFC names on OAuth routes. */
export type ErrorStatuses = Partial<Record<number, readonly string[]>>;

/** An example of one call: what is sent and, by the same name in `responses`, what comes back. */
export interface OperationExample {
  summary: string;
  /** Path parameters, query parameters and request headers, by name. */
  params?: Record<string, string>;
  query?: Record<string, string>;
  headers?: Record<string, string>;
  body?: unknown;
  /** Answer status; with `response`, the body that comes back. */
  status: number;
  response?: unknown;
}

declare module 'fastify' {
  interface FastifySchema {
    /** Error codes this route answers beyond those every route of its kind can answer (plugins/error-responses.ts). */
    errors?: ErrorStatuses;
    /** Named examples of calls, replayed by the contract test (test/openapi/contract.test.ts). */
    examples?: Record<string, OperationExample>;
  }
}

/** Response headers by name, each a JSON Schema with its description. */
export type Headers = Record<string, { description: string; type: string; [keyword: string]: unknown }>;

/** A JSON response. */
export const json = (description: string, schema: ZodType, headers?: Headers) => ({
  description,
  ...(headers ? { headers } : {}),
  content: { 'application/json': { schema } },
});

/** An HTML page response. */
export const html = (description: string) => ({ description, content: { 'text/html': { schema: HtmlPage } } });

/** A response of another media type whose body is text (CSS, JavaScript, YAML, Prometheus). */
export const text = (description: string, mediaType: string, schema: ZodType = z.string()) => ({ description, content: { [mediaType]: { schema } } });

/** A response without a body (204, 304, a redirect); `headers` documents what it carries instead. */
export const noBody = (description: string, headers?: Headers) => z.undefined().meta({ description, ...(headers ? { headers } : {}) });

export const locationHeader = (description: string): Headers => ({ Location: { description, type: 'string', format: 'uri-reference' } });

/** A redirect (302 or 303) to `where`. */
export const redirect = (where: string) => noBody(`Redirect to ${where}.`, locationHeader(where));

/** The credential a route requires, by security scheme name (src/openapi/document.ts). */
export type Security = Array<Record<string, string[]>>;

/** A confidential app authenticates (Basic, or `client_secret` in the body); a public app sends none. */
export const OPTIONAL_CLIENT_AUTH: Security = [{}, { clientBasic: [] }];

/**
 * For a scope's onRoute hook: what every route of the scope shares — its tag, the credential its
 * authentication hook requires, and the errors that hook (or a throttle) answers.
 */
export function shareRouteDocs(route: RouteOptions, shared: { tags: string[]; security?: Security; errors?: ErrorStatuses }): void {
  const schema = (route.schema ??= {});
  schema.tags ??= shared.tags;
  if (shared.security) schema.security ??= shared.security;
  const errors: ErrorStatuses = { ...schema.errors };
  for (const [status, codes] of Object.entries(shared.errors ?? {})) errors[Number(status)] = [...new Set([...(codes ?? []), ...(errors[Number(status)] ?? [])])];
  schema.errors = errors;
}
