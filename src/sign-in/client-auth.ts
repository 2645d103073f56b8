import type { Kysely } from 'kysely';
import { AppError, type ErrorReason } from '../errors.js';
import { hashSecret, safeEqual } from '../shared/ids.js';
import { type App, findApp } from '../storage/repos/apps.js';
import type { Database } from '../storage/schema.js';
import type { Throttle } from '../throttle/service.js';

/**
 * Client authentication (RFC 6749 §2.3; docs/reference/oauth.md#policies), the one rule for every request that issues or
 * rotates an app's tokens — `/oauth/token` and `/v1/auth/register|login|magic-link/verify|refresh|
 * profile/complete` — and for `/oauth/revoke` and `/oauth/introspect`: `none` (public apps: client_id
 * only), `client_secret_basic` and `client_secret_post` (`client_secret` beside `client_id` in the
 * form or JSON body). A confidential app must authenticate; a secret is compared by hash in constant
 * time. One method per request. Failures are 401 `invalid_client` with `WWW-Authenticate: Basic`.
 */

export type ClientAuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post';

export interface AuthenticatedClient<A extends App = App> {
  app: A;
  method: ClientAuthMethod;
}

/** Reads the app a client id names (findApp, or a variant that reads more in the same statement). */
export type AppReader<A extends App> = (db: Kysely<Database>, clientId: string) => Promise<A | undefined>;

interface BasicCredentials {
  clientId: string;
  clientSecret: string;
}

function invalidClient(detail: string, basic: boolean, reason?: ErrorReason): AppError {
  return new AppError('invalid_client', {
    detail,
    reason,
    headers: { 'www-authenticate': basic ? 'Basic realm="gatehouse", charset="UTF-8"' : 'Basic realm="gatehouse"' },
  });
}

/** Parses `Authorization: Basic` (RFC 6749 §2.3.1: form-urlencoded id and secret). Undefined when absent. */
export function parseBasic(header: string | undefined): BasicCredentials | undefined {
  if (!header || !/^basic /i.test(header)) return undefined;
  const decoded = Buffer.from(header.slice(6).trim(), 'base64').toString('utf8');
  const colon = decoded.indexOf(':');
  if (colon < 0) throw invalidClient('malformed Basic credentials', true);
  try {
    const clientId = decodeURIComponent(decoded.slice(0, colon).replace(/\+/g, ' '));
    const clientSecret = decodeURIComponent(decoded.slice(colon + 1).replace(/\+/g, ' '));
    return { clientId, clientSecret };
  } catch {
    throw invalidClient('malformed Basic credentials', true);
  }
}

/**
 * Wrong secrets per app and IP per minute (docs/security/checklist.md#brute-force-and-rate-limits): once an IP has sent this many for an
 * app within a minute, every secret it sends for that app answers 429 until the oldest is a minute old, the right one included
 * (a limit the right secret passed would tell a guesser when it had won). Per app and IP, so nobody can
 * lock an app's own servers out by sending wrong secrets in its name.
 */
export const MAX_FAILED_SECRETS_PER_MINUTE = 20;

/** What a request presents: its Authorization header and the client fields of its body, and where it comes from. */
export interface ClientCredentials {
  authorization?: string;
  clientId?: string;
  clientSecret?: string;
  /** The client IP (`request.ip`): secret guessing is limited per app and IP. */
  ip: string;
}

export async function authenticateClient<A extends App = App>(
  deps: { db: Kysely<Database>; throttle: Throttle },
  credentials: ClientCredentials,
  readApp: AppReader<A> = findApp as AppReader<A>,
): Promise<AuthenticatedClient<A>> {
  const basic = parseBasic(credentials.authorization);
  if (basic && credentials.clientSecret !== undefined) {
    throw new AppError('invalid_request', { message: 'Use only one client authentication method.' });
  }
  if (basic && credentials.clientId !== undefined && credentials.clientId !== basic.clientId) {
    throw new AppError('invalid_request', { message: 'client_id does not match the Authorization header.' });
  }
  const clientId = basic?.clientId ?? credentials.clientId;
  if (!clientId) {
    throw new AppError('invalid_client', { detail: 'no client identification' });
  }
  const secret = basic?.clientSecret ?? credentials.clientSecret;
  const method: ClientAuthMethod = basic ? 'client_secret_basic' : secret !== undefined ? 'client_secret_post' : 'none';

  const app = clientId.length <= 200 ? await readApp(deps.db, clientId) : undefined;
  // Unknown apps still cost one hash, so timing says nothing about which client ids exist.
  const presentedHash = secret !== undefined ? hashSecret(secret) : '';
  if (!app || app.disabled) throw invalidClient('unknown or disabled client', !!basic, app ? 'client_disabled' : 'client_unknown');

  if (app.type === 'confidential') {
    if (secret === undefined || !app.clientSecretHash) throw invalidClient('confidential client sent no secret', !!basic, 'client_secret_missing');
    const throttleKey = `client-secret-failure:${app.id}:${credentials.ip}`;
    await deps.throttle.assertUnderLimit(throttleKey, MAX_FAILED_SECRETS_PER_MINUTE, 60);
    if (!safeEqual(presentedHash, app.clientSecretHash)) {
      await deps.throttle.hitKey(throttleKey, MAX_FAILED_SECRETS_PER_MINUTE, 60);
      throw invalidClient('wrong client secret', !!basic, 'client_secret_wrong');
    }
  } else if (secret !== undefined && secret !== '') {
    // A public app has no secret; a secret sent anyway is a client mistake worth refusing.
    throw invalidClient('public client sent a secret', !!basic, 'client_secret_unexpected');
  }
  return { app, method };
}
