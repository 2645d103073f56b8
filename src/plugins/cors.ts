import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import type { Kysely } from 'kysely';
import { corsHeadersFor, originsOfApp, originsOfApps } from '../shared/cors.js';
import { appsVersion, findApp, listAppOrigins } from '../storage/repos/apps.js';
import type { Database } from '../storage/schema.js';

/**
 * CORS for the endpoints single-page apps call (docs/reference/rest-api.md#cors), one mechanism for every
 * scope that has it: the origins of the app a request is for, on answers and errors alike, and
 * preflights that allow the origins of every app (a preflight names no app). Scopes that must never
 * send CORS headers (authorize, hosted pages, /v1/dev, /v1/admin) simply don't use it.
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** The app a CORS-enabled request was identified as (its client or credential): its origins are allowed. */
    corsAppId?: string;
  }
  interface FastifyInstance {
    /** The origins of every app, for the requests that name none. */
    allAppOrigins: AllAppOrigins;
  }
}

/**
 * The origins of every app (where a request names none: preflights, discovery, JWKS), kept in memory
 * and rebuilt only when the apps changed: each use reads the apps' version stamp (one row, replaced
 * in the transaction of every app write, on any process), so an anonymous request never reads the
 * apps table, however many apps there are, and a change shows on every process at once. Concurrent
 * rebuilds are one.
 */
export class AllAppOrigins {
  private current: { version: string | undefined; origins: ReadonlySet<string> } | undefined;
  private rebuilding: { version: string | undefined; origins: Promise<ReadonlySet<string>> } | undefined;

  constructor(private readonly db: Kysely<Database>) {}

  async get(): Promise<ReadonlySet<string>> {
    const version = await appsVersion(this.db);
    const current = this.current;
    if (current && current.version === version) return current.origins;
    // A rebuild started for an older stamp may have read the apps before this change: only one for this stamp will do.
    let rebuild = this.rebuilding;
    if (!rebuild || rebuild.version !== version) {
      const started = {
        version,
        origins: listAppOrigins(this.db).then((apps) => {
          const origins = originsOfApps(apps);
          this.current = { version, origins };
          return origins;
        }),
      };
      rebuild = this.rebuilding = started;
      void started.origins
        .finally(() => {
          if (this.rebuilding === started) this.rebuilding = undefined;
        })
        .catch(() => undefined);
    }
    return rebuild.origins;
  }
}

/** `app.allAppOrigins`, one per process. */
export default fp(
  async (app: FastifyInstance) => {
    app.decorate('allAppOrigins', new AllAppOrigins(app.db));
  },
  { name: 'all-app-origins', dependencies: ['db'] },
);

export interface CorsPolicy {
  /** The client_id a request names before it is authenticated (a body field, X-Client-Id, Basic credentials). */
  appIdOf?: (request: FastifyRequest) => string | undefined;
  /** When the request names no app: allow the origins of every app (discovery, JWKS, userinfo) or none. */
  unnamed: 'all-apps' | 'none';
}

async function allowedOrigins(request: FastifyRequest, policy: CorsPolicy): Promise<ReadonlySet<string> | string[]> {
  let clientId = request.corsAppId;
  if (!clientId) {
    try {
      clientId = policy.appIdOf?.(request);
    } catch {
      clientId = undefined; // a malformed credential names no app
    }
  }
  if (clientId && clientId.length <= 200) {
    const app = await findApp(request.server.db, clientId);
    return app ? originsOfApp(app) : [];
  }
  return policy.unnamed === 'all-apps' ? request.server.allAppOrigins.get() : [];
}

/** An onSend hook adding the CORS headers of `policy` to every answer (apps are read only when a browser sends Origin). */
export function corsOnSend(policy: CorsPolicy) {
  return async (request: FastifyRequest, reply: FastifyReply): Promise<void> => {
    const origin = request.headers.origin;
    if (origin === undefined || request.method === 'OPTIONS') return;
    reply.headers(corsHeadersFor(origin, await allowedOrigins(request, policy)));
  };
}

/** Handler of an OPTIONS preflight route. */
export async function answerPreflight(request: FastifyRequest, reply: FastifyReply): Promise<FastifyReply> {
  const origin = request.headers.origin;
  const allowed = origin === undefined ? [] : await request.server.allAppOrigins.get();
  return reply.code(204).headers(corsHeadersFor(origin, allowed, 'preflight')).send();
}

/** The `client_id` a JSON or form body carries, if it is a string. */
export function bodyClientId(request: FastifyRequest): string | undefined {
  const value = (request.body as Record<string, unknown> | undefined)?.client_id;
  return typeof value === 'string' ? value : undefined;
}

/** The single `X-Client-Id` value, if exactly one was sent. */
export function headerClientId(request: FastifyRequest): string | undefined {
  const raw = request.headers['x-client-id'];
  const values = raw === undefined ? [] : [raw].flat().flatMap((v) => String(v).split(','));
  return values.length === 1 ? values[0]!.trim() : undefined;
}
