import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { resourceList, unallowedResources } from '../../shared/resources.js';
import { joinScope, scopeList } from '../../shared/scopes.js';
import type { ClientTokenResponse } from '../../tokens/service.js';
import type { Params } from '../params.js';
import type { ClientAuthenticator } from '../token.js';

/**
 * grant_type=client_credentials (RFC 6749 §4.4, docs/reference/oauth.md#client-credentials): a confidential
 * app whose developer turned it on gets an access token for itself (no user), for the resources it
 * declared and the scopes it was allowed; no refresh token, no ID token.
 */
export async function clientCredentialsGrant(app: FastifyInstance, _request: FastifyRequest, params: Params, authenticate: ClientAuthenticator, dpopJkt: string | undefined): Promise<ClientTokenResponse> {
  const client = await authenticate();
  // A public app's client_id proves nothing: it could never hold a token of its own.
  if (client.type !== 'confidential') throw new AppError('unauthorized_client', { message: 'Only confidential applications may use client credentials.', detail: 'client_credentials by a public app' });
  if (!client.clientCredentials.enabled) throw new AppError('unauthorized_client', { message: 'Client credentials are not enabled for this application.', detail: 'client_credentials off' });
  const allowedScopes = client.clientCredentials.scopes;
  const asked = params.scope === undefined || params.scope.trim() === '' ? allowedScopes : scopeList(params.scope);
  if (asked.some((scope) => !allowedScopes.includes(scope))) throw new AppError('invalid_scope', { message: 'A requested scope is not allowed for client credentials.', detail: 'client_credentials scope not allowed' });
  const requested = resourceList(params.resource);
  // Only the declared APIs: Gatehouse's own endpoints serve users, never a client on its own.
  if (unallowedResources(requested, client.resourceUris, '').length) throw new AppError('invalid_target', { message: 'A requested resource is not one this application declared.', detail: 'resource not declared' });
  const audience = requested.length ? requested : client.resourceUris;
  if (!audience.length) throw new AppError('invalid_target', { message: 'This application declared no resource to ask a token for.', detail: 'no resource declared' });
  return app.tokens.issueClientToken({ app: client, scope: joinScope(asked), audience, dpopJkt });
}
