import type { FastifyRequest, FastifyServerOptions, onRequestHookHandler } from 'fastify';
import type { LoggerOptions } from 'pino';

/** Query parameters whose values are secrets: replaced in logged URLs (docs/security/checklist.md#logging-and-errors). */
const SECRET_QUERY_PARAMS = new Set([
  'code', 'token', 'magic_token', 'reset_token', 'session', 'refresh_token', 'access_token', 'id_token',
  'code_verifier', 'ticket', 'client_secret', 'idp_code', 'api_key', 'password', 'state', 'nonce', 'code_challenge', 'request_uri',
  'user_code', 'device_code',
]);

export function redactUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const params = new URLSearchParams(url.slice(q + 1));
  for (const key of [...params.keys()]) if (SECRET_QUERY_PARAMS.has(key.toLowerCase())) params.set(key, '[redacted]');
  return `${url.slice(0, q)}?${params.toString()}`;
}

/** The request and reply as log lines show them: method, URL without secrets, address, user agent; the status. */
const serializers = {
  req(request: { method: string; url: string; ip?: string; headers?: Record<string, string | string[] | undefined> }) {
    return {
      method: request.method,
      url: redactUrl(request.url),
      remoteAddress: request.ip,
      userAgent: request.headers?.['user-agent'],
    };
  },
  res(reply: { statusCode: number }) {
    return { statusCode: reply.statusCode };
  },
};

/**
 * The access line's logger: its fields are only what `serializers` pick, none of them secret, so it
 * skips the redaction walk, which cost about 15% of a `/healthz` request (bench/RESULTS.md, "http").
 */
export function accessLogOptions(level: string): LoggerOptions {
  return { level, serializers };
}

export function loggerOptions(level: string): Exclude<FastifyServerOptions['logger'], boolean | undefined> {
  return {
    level,
    redact: {
      paths: [
        'req.headers.authorization',
        'req.headers.cookie',
        'res.headers["set-cookie"]',
        '*.password',
        '*.new_password',
        '*.client_secret',
        '*.code',
        '*.code_verifier',
        '*.device_code',
        '*.user_code',
        '*.refresh_token',
        '*.access_token',
        '*.id_token',
        '*.token',
        '*.session',
        '*.api_key',
        '*.secret',
      ],
      censor: '[redacted]',
    },
    serializers: { req: serializers.req },
  };
}

const quietRequests = new WeakSet<FastifyRequest>();

/**
 * A route's onRequest hook: a successful answer writes no access line. Health probes come every few
 * seconds from every balancer and orchestrator, and a line each would drown the log (and cost a busy
 * server more than the answer). A failed probe is still logged. (A set, not the route's config: reading
 * `request.routeOptions` builds an object on every call, and the access log asks on every request.)
 */
export const quietWhenOk: onRequestHookHandler = (request, _reply, done) => {
  quietRequests.add(request);
  done();
};

export const isQuietWhenOk = (request: FastifyRequest): boolean => quietRequests.has(request);
