import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import { AppError, describeError, ERROR_CATALOGUE, type ErrorCode } from '../errors.js';
import { TurnAbandoned, TurnOverdue } from '../shared/turns.js';
import { appendQuery } from '../shared/url.js';
import { discardUnreadBody } from './unread-body.js';

/**
 * The one place that decides the HTTP shape of an error (STYLE.md "Errors"):
 * - route config `errorStyle: 'json'` (default) → `{code, message, details?, …}`;
 * - `'oauth'` → RFC 6749 §5.2 `{error, error_description}` with no-store (and `WWW-Authenticate` on 401);
 * - `'html'` → the hosted error page;
 * - and once a route has verified `client_id` + `redirect_uri` (it sets `request.errorRedirect`),
 *   errors go back to that URI as `error`, `error_description`, `state`, `iss` (RFC 9207).
 * 5xx bodies are always generic; the real error is logged with the request id. Outside production the
 * text names the exact reason when the error carries one (errors.ts `describeError`).
 */

export type ErrorStyle = 'json' | 'oauth' | 'html';

declare module 'fastify' {
  interface FastifyContextConfig {
    errorStyle?: ErrorStyle;
    /** Accept `application/x-www-form-urlencoded` bodies on this route (JSON is always accepted). */
    acceptForm?: boolean;
    /** Other body media types the route parses itself (the user import's `application/x-ndjson`). */
    acceptTypes?: readonly string[];
    /** Keep the RFC 7591 §3.2.2 error names (`invalid_redirect_uri`) in the `oauth` style (client registration). */
    registrationErrors?: boolean;
  }
  interface FastifyRequest {
    /** Set once client_id and redirect_uri are verified: errors from then on redirect back. */
    errorRedirect?: { redirectUri: string; state?: string };
  }
}

export interface ErrorHandlerOptions {
  issuer: string;
  /** Production keeps the generic messages; elsewhere responses name the exact reason (`describeError`). */
  production: boolean;
  /** Renders the hosted HTML error page (provided by the pages feature). */
  renderHtmlError?: (request: FastifyRequest, reply: FastifyReply, error: AppError) => unknown;
}

/** RFC 6749 names for our codes where they differ, at the /oauth endpoints. */
export const OAUTH_NAMES: Partial<Record<ErrorCode, string>> = {
  unauthorized: 'invalid_token',
  internal_error: 'server_error',
  service_unavailable: 'temporarily_unavailable',
  invalid_json: 'invalid_request',
  unsupported_media_type: 'invalid_request',
  payload_too_large: 'invalid_request',
  invalid_redirect_uri: 'invalid_request',
  forbidden: 'access_denied',
  user_disabled: 'access_denied',
  user_blocked: 'access_denied',
};

const FASTIFY_CODES: Record<string, ErrorCode> = {
  FST_ERR_CTP_INVALID_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_EMPTY_JSON_BODY: 'invalid_json',
  FST_ERR_CTP_INVALID_MEDIA_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_INVALID_TYPE: 'unsupported_media_type',
  FST_ERR_CTP_BODY_TOO_LARGE: 'payload_too_large',
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: 'invalid_request',
  FST_ERR_CTP_INVALID_CHARSET: 'unsupported_media_type',
  FST_ERR_NOT_FOUND: 'not_found',
  // Refused by the router before any route runs (Fastify's frameworkErrors).
  FST_ERR_BAD_URL: 'invalid_request',
  FST_ERR_MAX_PARAM_LENGTH: 'uri_too_long',
};

interface ValidationIssue {
  instancePath?: string;
  message?: string;
  params?: { path?: Array<string | number> };
}

/**
 * Errors that mean "the database cannot be reached or is locked right now", not "this request is bad":
 * they answer 503 with Retry-After (fail closed: the client retries).
 */
const DATABASE_UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE', 'ENOTFOUND',
  // PostgreSQL: connection exceptions (08xxx), too many connections, shutdown / cannot connect now.
  '08000', '08001', '08003', '08004', '08006', '53300', '57P01', '57P02', '57P03',
  // SQLite: another connection holds the write lock past busy_timeout; the disk is full (nothing of the
  // failed write was kept: the group commit fails its whole batch, docs/adr/0003-sqlite-group-commit.md).
  'SQLITE_BUSY', 'SQLITE_LOCKED', 'SQLITE_FULL',
  // PostgreSQL: a statement that waited past statement_timeout or lock_timeout (the SQLITE_BUSY of PostgreSQL).
  '57014', '55P03',
]);

function isDatabaseUnavailable(error: { code?: unknown; message?: unknown } | undefined): boolean {
  if (!error) return false;
  if (typeof error.code === 'string' && (DATABASE_UNAVAILABLE_CODES.has(error.code) || error.code.startsWith('SQLITE_IOERR'))) return true;
  // pg's own messages for a connection lost mid-request (no SQLSTATE): while connecting, while a query
  // ran, and for the rollback that follows on the dead connection.
  return typeof error.message === 'string' && /timeout exceeded when trying to connect|Connection terminated|not queryable/.test(error.message);
}

/**
 * PostgreSQL "data exception" (SQLSTATE class 22): the database refused a value the client sent, such
 * as a NUL byte in text (22021). That is bad input, not a server fault; the statement's transaction
 * was rolled back, so nothing changed.
 */
function isRefusedValue(error: { code?: unknown; severity?: unknown } | undefined): boolean {
  return typeof error?.code === 'string' && /^22[0-9A-Z]{3}$/.test(error.code) && typeof error.severity === 'string';
}

/** Turns anything thrown into an AppError. Unknown errors become internal_error (details only logged). */
export function toAppError(error: unknown): AppError {
  if (error instanceof AppError) return error;
  // Nobody reads this answer: the client left while its work waited for a turn (/metrics counts these).
  // A 4xx, nginx's 499 "client closed request", keeps a flood of them out of the error log.
  if (error instanceof TurnAbandoned) return new AppError('service_unavailable', { status: 499, detail: 'client gone before its turn: not computed' });
  // Overloaded: the work waited over its bound and was not started. The line held at least that much
  // work, so a retry sooner would only join it again.
  if (error instanceof TurnOverdue) {
    const retryAfter = String(Math.max(1, Math.ceil(error.maxWaitMs / 1000)));
    return new AppError('service_unavailable', { reason: 'password_checks_overloaded', detail: error.message, headers: { 'retry-after': retryAfter } });
  }
  const e = error as FastifyError & { validation?: ValidationIssue[]; validationContext?: string; type?: string };
  if (e && Array.isArray(e.validation)) {
    const details = e.validation.map((issue) => {
      const segments = (issue.params as { path?: unknown[] } | undefined)?.path;
      const path = segments ? segments.join('.') : (issue.instancePath ?? '').replace(/^\//, '').replace(/\//g, '.');
      return { path: [e.validationContext, path].filter(Boolean).join('.'), message: issue.message ?? 'is invalid' };
    });
    return new AppError('invalid_request', { details, detail: 'validation failed' });
  }
  if (e && typeof e.code === 'string' && FASTIFY_CODES[e.code]) return new AppError(FASTIFY_CODES[e.code]!, { detail: e.message });
  if (e && e.name === 'SyntaxError' && e.statusCode === 400) return new AppError('invalid_json', { detail: e.message });
  if (e && typeof e.statusCode === 'number' && e.statusCode >= 400 && e.statusCode < 500) {
    // Other client errors raised by Fastify itself (proto poisoning, bad headers, …).
    const byStatus: Record<number, ErrorCode> = { 404: 'not_found', 405: 'method_not_allowed', 413: 'payload_too_large', 415: 'unsupported_media_type' };
    return new AppError(byStatus[e.statusCode] ?? 'invalid_request', { status: e.statusCode >= 431 ? e.statusCode : undefined, detail: e.message });
  }
  if (isRefusedValue(e as { code?: unknown; severity?: unknown })) {
    return new AppError('invalid_request', { message: 'The request contains a value that cannot be stored (for example a NUL character).', detail: `database refused a value: ${String(e.code)}` });
  }
  if (isDatabaseUnavailable(e)) {
    return new AppError('service_unavailable', { cause: error, detail: `database unavailable: ${String(e.code ?? e.message)}`, headers: { 'retry-after': '5' } });
  }
  return new AppError('internal_error', { cause: error, detail: e?.message });
}

/**
 * The one log line of a refused request: a failure (something threw: a bug, an outage) at error with
 * its cause and stack; a 5xx the server chose without one (overloaded, not configured) at warn, one
 * short line each, since a flood of them is one condition; the rest (the client's) at info.
 */
export function logRefusal(request: Pick<FastifyRequest, 'log'>, err: AppError): void {
  if (err.status >= 500 && err.cause !== undefined) request.log.error({ err: err.cause, code: err.code }, 'request failed');
  else if (err.status >= 500) request.log.warn({ code: err.code, detail: err.detail }, 'request refused');
  else request.log.info({ code: err.code, detail: err.detail }, 'request rejected');
}

export function sendError(request: FastifyRequest, reply: FastifyReply, err: AppError, options: ErrorHandlerOptions): unknown {
  logRefusal(request, err);
  const description = describeError(err, { production: options.production });

  if (err.headers) reply.headers(err.headers);
  if (err.code === 'rate_limited' && typeof err.extra?.retry_after === 'number') reply.header('retry-after', String(err.extra.retry_after));

  const redirect = request.errorRedirect;
  if (redirect && err.status < 500 && err.code !== 'rate_limited') {
    const error = request.routeOptions.config.registrationErrors && err.code === 'invalid_redirect_uri' ? err.code : (OAUTH_NAMES[err.code] ?? err.code);
    reply.header('cache-control', 'no-store');
    return reply.redirect(
      appendQuery(redirect.redirectUri, { error, error_description: description, state: redirect.state, iss: options.issuer }),
      302,
    );
  }

  const style = request.routeOptions?.config?.errorStyle ?? 'json';
  reply.code(err.status);
  if (style === 'html') {
    if (options.renderHtmlError) return options.renderHtmlError(request, reply, err);
    return reply.type('text/html; charset=utf-8').send(`<!doctype html><title>Error</title><p>${err.code}</p>`);
  }
  if (style === 'oauth') {
    reply.header('cache-control', 'no-store').header('pragma', 'no-cache');
    const error = request.routeOptions.config.registrationErrors && err.code === 'invalid_redirect_uri' ? err.code : (OAUTH_NAMES[err.code] ?? err.code);
    if (err.status === 401 && !reply.hasHeader('www-authenticate')) {
      reply.header('www-authenticate', err.code === 'invalid_client' ? 'Basic realm="gatehouse"' : `Bearer error="${error}"`);
    }
    return reply.send({ error, error_description: description });
  }
  if (err.status === 401 && err.code === 'unauthorized' && !reply.hasHeader('www-authenticate')) {
    reply.header('www-authenticate', 'Bearer error="invalid_token"');
  }
  return reply.send({
    code: err.code,
    message: description,
    ...(err.details ? { details: err.details } : {}),
    ...(err.extra ?? {}),
  });
}

/**
 * What Node's HTTP parser refuses before Fastify sees a request (Fastify's `clientErrorHandler`): headers
 * over the size limit (431), a request that did not arrive in time (408), anything else malformed (400),
 * answered in the catalogue's JSON shape on the raw socket, which is then closed.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const code: ErrorCode =
    error.code === 'HPE_HEADER_OVERFLOW' ? 'headers_too_large' : error.code === 'ERR_HTTP_REQUEST_TIMEOUT' ? 'request_timeout' : 'invalid_request';
  const [status, message] = ERROR_CATALOGUE[code];
  const body = JSON.stringify({ code, message });
  if (socket.writable) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\nContent-Type: application/json; charset=utf-8\r\nContent-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy();
}

async function errorHandlerPlugin(app: FastifyInstance, options: ErrorHandlerOptions) {
  app.setErrorHandler((error, request, reply) => {
    discardUnreadBody(request, reply);
    return sendError(request, reply, toAppError(error), options);
  });
  app.setNotFoundHandler((request, reply) => {
    const detail = `${request.method} ${request.url.split('?')[0]}`;
    // A known path with another method: 405 with Allow (RFC 9110 §15.5.6).
    const allowed = app.allowedMethods(request.url);
    if (allowed.length) return sendError(request, reply, new AppError('method_not_allowed', { detail, headers: { allow: allowed.join(', ') } }), options);
    return sendError(request, reply, new AppError('not_found', { detail }), options);
  });

  // Bodies: JSON everywhere; form bodies only where a route opts in (OAuth endpoints, hosted forms).
  // Callback style: it runs on every request, and an async hook costs each a promise.
  app.addHook('preValidation', (request, _reply, done) => {
    // Hosted forms check their own bodies (CSRF first, so a forged post is 403 whatever its type).
    if (request.body === undefined || request.routeOptions.config.csrf) return done();
    const type = (request.headers['content-type'] ?? '').toLowerCase();
    const [mime, ...params] = type.split(';').map((s) => s.trim());
    const charset = params.find((p) => p.startsWith('charset='))?.slice(8).replace(/"/g, '');
    if (charset && charset !== 'utf-8' && charset !== 'utf8') return done(new AppError('unsupported_media_type', { detail: `charset ${charset}` }));
    if (mime === 'application/json') return done();
    if (mime === 'application/x-www-form-urlencoded' && request.routeOptions.config.acceptForm) return done();
    if (mime && request.routeOptions.config.acceptTypes?.includes(mime)) return done();
    done(new AppError('unsupported_media_type', { detail: `content-type ${mime}` }));
  });
}

export default fp(errorHandlerPlugin, { name: 'error-handler', dependencies: ['route-list'] });
