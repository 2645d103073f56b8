import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { hasScope } from '../shared/scopes.js';
import { findUserById } from '../storage/repos/users.js';
import { noStore } from './token.js';

/**
 * GET|POST /oauth/userinfo (OIDC Core §5.3): `Authorization: Bearer <access token>`, or on POST the
 * `access_token` field of a form body (RFC 6750 §2.2), never both and never the query (
 * docs/security/checklist.md#access-tokens); session JWTs are refused. Errors follow RFC 6750 with `WWW-Authenticate`. Claims: `sub`;
 * `email`, `email_verified` with scope email; `name` with profile.
 */
export async function userinfo(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const identity = await app.tokens.authenticate(request, { allowFormBody: true, reply });
  request.corsAppId = identity.appId;
  if (!hasScope(identity.scope, 'openid')) {
    throw new AppError('insufficient_scope', {
      headers: { 'www-authenticate': 'Bearer error="insufficient_scope", scope="openid"' },
      detail: 'userinfo without openid scope',
    });
  }
  const user = await findUserById(app.db, identity.userId);
  if (!user) throw new AppError('unauthorized', { detail: 'user gone' });
  return reply.send({
    sub: user.id,
    ...(hasScope(identity.scope, 'email') ? { email: user.email, email_verified: user.email_verified === 1 } : {}),
    ...(hasScope(identity.scope, 'profile') ? { name: user.name ?? undefined } : {}),
  });
}
