import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { requestContext } from '../../shared/request-context.js';
import { unknownScopes } from '../../shared/scopes.js';
import type { App } from '../../storage/repos/apps.js';
import { required, type Params } from '../params.js';

/**
 * grant_type=refresh_token (RFC 6749 §6, CONTRACT §3, §14.13): rotation, the grace-window replay and
 * family revocation on reuse all live in `app.tokens.refresh`, shared with `/v1/auth/refresh`. The
 * answer is its exact JSON text, so concurrent refreshes get byte-identical bodies. Scope may only narrow.
 */
export async function refreshTokenGrant(app: FastifyInstance, request: FastifyRequest, client: App, params: Params): Promise<string> {
  const refreshToken = required(params, 'refresh_token');
  if (refreshToken.length > 512) throw new AppError('invalid_grant', { detail: 'refresh token too long', reason: 'refresh_token_unknown' });
  const scope = params.scope === undefined || params.scope.trim() === '' ? undefined : params.scope;
  if (scope !== undefined && unknownScopes(scope).length) throw new AppError('invalid_scope');
  return app.tokens.refresh({ refreshToken, client, scope }, requestContext(request));
}
