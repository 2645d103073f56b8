import type { FastifyRequest } from 'fastify';
import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import { authenticateClient } from './client-auth.js';
import { type App, findApp } from '../storage/repos/apps.js';
import type { Database } from '../storage/schema.js';
import type { Throttle } from '../throttle/service.js';
import type { BearerIdentity, TokenService } from '../tokens/service.js';
import { isRegisteredRedirectUri } from '../shared/redirect-uri-match.js';

// Which app a sign-in request comes from: every REST sign-in door (/v1/auth, passkeys, the MFA step) asks here.

/**
 * The app a `/v1/auth` request names, by `client_id` in the body or `X-Client-Id` (they must agree;
 * missing → 400 invalid_request). Where the request issues or rotates tokens (`authenticate`), the app
 * authenticates as at `/oauth/token` (docs/reference/oauth.md#policies: Basic, or `client_secret` in the body; a
 * confidential app without it → 401 invalid_client). Unknown or disabled → 401 invalid_client; no
 * Auth feature → 403 feature_disabled.
 */
export async function resolveApp(
  deps: { db: Kysely<Database>; throttle: Throttle },
  request: FastifyRequest,
  body: { client_id?: string; client_secret?: string },
  options: { authenticate: boolean; fallbackClientId?: string },
): Promise<App> {
  const named = namedClientId(request, body);
  let client: App | undefined;
  if (options.authenticate) {
    const authorization = request.headers.authorization;
    const clientId = named ?? (authorization ? undefined : options.fallbackClientId);
    if (!clientId && !authorization) throw missingClient();
    client = (await authenticateClient(deps, { authorization, clientId, clientSecret: body.client_secret, ip: request.ip })).app;
  } else {
    if (!named) throw missingClient();
    client = await findApp(deps.db, named);
    if (!client || client.disabled) throw new AppError('invalid_client', { detail: 'unknown or disabled app' });
  }
  if (!client.features.auth) throw new AppError('feature_disabled', { detail: 'app lacks the Auth feature' });
  return client;
}

/** The app a `/v1/auth` request names: `client_id` in the body or `X-Client-Id` (400 when they differ); undefined when neither. */
export function namedClientId(request: FastifyRequest, body: { client_id?: string }): string | undefined {
  const header = request.headers['x-client-id'];
  const headerId = typeof header === 'string' && header.length > 0 ? header : undefined;
  if (headerId && body.client_id && headerId !== body.client_id) {
    throw new AppError('invalid_request', { details: [{ path: 'client_id', message: 'differs from X-Client-Id' }] });
  }
  return body.client_id ?? headerId;
}

const missingClient = () => new AppError('invalid_request', { details: [{ path: 'client_id', message: 'client_id or X-Client-Id is required' }] });

/** An exact whitelist match, or 400 invalid_redirect_uri. */
export function checkRedirectUri(client: App, redirectUri: string | undefined): string | undefined {
  if (redirectUri === undefined) return undefined;
  if (!isRegisteredRedirectUri(client.redirectUris, redirectUri)) throw new AppError('invalid_redirect_uri', { reason: 'redirect_uri_not_registered' });
  return redirectUri;
}

/**
 * The person of an access token at a `/v1/auth` self-service door (the data export, the email change):
 * a token outlives its app's switch-off by its lifetime at most, so a disabled app gets 401 and one
 * without the Auth feature 403 `feature_disabled`; a session JWT of a pending sign-in is no credential.
 * The token's app is the request's CORS app.
 */
export async function authenticateAtApp(tokens: TokenService, request: FastifyRequest): Promise<BearerIdentity> {
  const identity = await tokens.authenticate(request);
  request.corsAppId = identity.appId;
  const client = identity.grant.app;
  if (client.disabled) throw new AppError('unauthorized', { detail: `app ${client.id} disabled` });
  if (!client.features.auth) throw new AppError('feature_disabled', { detail: `app ${client.id} lacks auth` });
  return identity;
}
