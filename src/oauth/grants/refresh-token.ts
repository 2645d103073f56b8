import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { requestContext } from '../../shared/request-context.js';
import { unknownScopes } from '../../shared/scopes.js';
import { hashSecret } from '../../shared/ids.js';
import type { ClientAuthenticator } from '../token.js';
import { required, type Params } from '../params.js';

/** Longer than any refresh token this server issues: refused without a lookup. */
const MAX_REFRESH_TOKEN_LENGTH = 512;

/**
 * grant_type=refresh_token (RFC 6749 §6, docs/reference/tokens.md#refresh-tokens): rotation, the grace-window replay and
 * family revocation on reuse all live in `app.tokens.refresh`, shared with `/v1/auth/refresh`. The
 * answer is its exact JSON text, so concurrent refreshes get byte-identical bodies. Scope may only narrow.
 */
export async function refreshTokenGrant(app: FastifyInstance, request: FastifyRequest, params: Params, authenticate: ClientAuthenticator, dpopJkt: string | undefined): Promise<string> {
  const presented = params.refresh_token;
  if (presented === undefined || presented === '' || presented.length > MAX_REFRESH_TOKEN_LENGTH) {
    await authenticate();
    required(params, 'refresh_token');
    throw new AppError('invalid_grant', { detail: 'refresh token too long', reason: 'refresh_token_unknown' });
  }
  const tokenHash = hashSecret(presented);
  // The client and the presented token's family, in one statement (on PostgreSQL, shared with the grants
  // in flight). The token service reads the app's database, the one the authenticator offers.
  const client = await authenticate((_db, clientId) => app.tokens.findAppWithRefreshFamily(clientId, tokenHash));
  const scope = params.scope === undefined || params.scope.trim() === '' ? undefined : params.scope;
  if (scope !== undefined && unknownScopes(scope).length) throw new AppError('invalid_scope');
  return app.tokens.refresh({ family: client.refreshFamily, client, scope, dpopJkt, resource: params.resource }, requestContext(request));
}
