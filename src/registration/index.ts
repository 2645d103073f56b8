import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { bearerCredential } from '../shared/bearer.js';
import { requestContext } from '../shared/request-context.js';
import { json, noBody, shareRouteDocs } from '../shared/responses.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import {
  ClientMetadataBody,
  ClientRegistration,
  CreateInitialAccessTokenBody,
  InitialAccessToken,
  InitialAccessTokenList,
  InitialAccessTokenParams,
  QuarantinedClientList,
  QuarantinedClientParams,
  RegistrationParams,
} from './schemas.js';
import {
  approveClient,
  deleteRegistration,
  issueInitialAccessToken,
  listInitialAccessTokenViews,
  listQuarantinedClients,
  readRegistration,
  registerClient,
  rejectClient,
  replaceRegistration,
  revokeInitialAccessTokenOf,
} from './service.js';

/**
 * Dynamic client registration (docs/reference/oauth.md#dynamic-client-registration-rfc-7591): `POST /oauth/register`
 * (RFC 7591) and `GET|PUT|DELETE /oauth/register/{client_id}` (RFC 7592). Off unless DYNAMIC_REGISTRATION=1:
 * then every route answers 404, as an unknown path would.
 */
export default async function registrationRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.addHook('onRoute', (route) => shareRouteDocs(route, { tags: ['oauth'], errors: { 404: ['not_found'] } }));
  app.addHook('onRequest', async () => {
    if (!app.config.registration.enabled) throw new AppError('not_found', { detail: 'dynamic client registration is off' });
  });
  const deps = (request: FastifyRequest) => ({ db: app.db, now: app.clock.now(), baseUrl: app.config.baseUrl, ctx: requestContext(request) });
  const token = (request: FastifyRequest) => {
    const header = request.headers.authorization;
    return header ? bearerCredential(header) ?? '' : undefined;
  };
  const config = { errorStyle: 'oauth' as const, registrationErrors: true };
  const security = [{ accessToken: [] }];

  app.post(
    '/oauth/register',
    {
      config,
      schema: {
        operationId: 'registerClient',
        summary: 'Register a client (RFC 7591)',
        description:
          'With `Authorization: Bearer <initial access token>` (issued in the developer API) the client becomes an app of that developer, active at once; a single-use token registers one client. Without a token, only when OPEN_REGISTRATION=1: public clients only (`token_endpoint_auth_method: none`), OPEN_REGISTRATION_PER_HOUR per IP, no redirect URI on a host or scheme another app uses, and the client is quarantined (it cannot sign anyone in) until the operator approves it. The answer carries `registration_access_token` and `registration_client_uri` for RFC 7592, and a confidential client\'s `client_secret`, once.',
        security: [{}, ...security],
        body: ClientMetadataBody,
        response: { 201: json('The client (`Cache-Control: no-store`).', ClientRegistration) },
        errors: { 400: ['invalid_client_metadata', 'invalid_redirect_uri', 'invalid_request'], 401: ['invalid_token'], 429: ['rate_limited'] },
      },
    },
    async (request, reply) => {
      const initialAccessToken = token(request);
      if (initialAccessToken === undefined && app.config.registration.open) {
        await app.throttle.hitKey(`open-registration:${request.ip}`, app.config.registration.openPerHour, 3600);
      }
      const registered = await registerClient(deps(request), { initialAccessToken, open: app.config.registration.open, body: request.body });
      reply.code(201).header('cache-control', 'no-store');
      return registered;
    },
  );

  const manageErrors = { 401: ['invalid_token'] };
  app.get(
    '/oauth/register/:client_id',
    {
      config,
      schema: {
        operationId: 'readClientRegistration',
        summary: "Read a client's registration (RFC 7592)",
        description: "`Authorization: Bearer <registration_access_token>` of this client; any other token is 401 `invalid_token`.",
        security,
        params: RegistrationParams,
        response: { 200: json('The registration (no secrets).', ClientRegistration) },
        errors: manageErrors,
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      return readRegistration(deps(request), request.params.client_id, token(request));
    },
  );
  app.put(
    '/oauth/register/:client_id',
    {
      config,
      schema: {
        operationId: 'updateClientRegistration',
        summary: "Replace a client's metadata (RFC 7592)",
        description: 'The body is the whole metadata with `client_id`; the name and redirect URIs change. The client type (public or confidential) and a quarantine stay.',
        security,
        params: RegistrationParams,
        body: ClientMetadataBody,
        response: { 200: json('The registration.', ClientRegistration) },
        errors: { ...manageErrors, 400: ['invalid_client_metadata', 'invalid_redirect_uri', 'invalid_request'] },
      },
    },
    async (request, reply) => {
      reply.header('cache-control', 'no-store');
      return replaceRegistration(deps(request), request.params.client_id, token(request), request.body);
    },
  );
  app.delete(
    '/oauth/register/:client_id',
    {
      config,
      schema: {
        operationId: 'deleteClientRegistration',
        summary: 'Delete a client (RFC 7592)',
        description: 'The app goes, with its grants, tokens and consents.',
        security,
        params: RegistrationParams,
        response: { 204: noBody('Deleted.') },
        errors: manageErrors,
      },
    },
    async (request, reply) => {
      await deleteRegistration(deps(request), request.params.client_id, token(request));
      return reply.code(204).send();
    },
  );
}

/** `/v1/dev/initial-access-tokens` (docs/reference/rest-api.md#developers): registered inside the developer API scope. */
export async function initialAccessTokenRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/initial-access-tokens',
    {
      schema: {
        operationId: 'createInitialAccessToken',
        summary: 'Issue an initial access token (RFC 7591)',
        description: 'Clients registered with it at `POST /oauth/register` become apps of this developer. The token is shown only in this answer; at most 50 live tokens.',
        body: CreateInitialAccessTokenBody,
        response: { 201: json('The token, with `token` this once.', InitialAccessToken) },
      },
    },
    async (request, reply) => {
      reply.code(201).header('cache-control', 'no-store');
      return issueInitialAccessToken(app.db, app.clock.now(), request.developer.id, request.body);
    },
  );
  app.get(
    '/initial-access-tokens',
    { schema: { operationId: 'listInitialAccessTokens', summary: "List the developer's initial access tokens", response: { 200: json('The tokens (never the token values).', InitialAccessTokenList) } } },
    async (request) => ({ items: await listInitialAccessTokenViews(app.db, request.developer.id) }),
  );
  app.delete(
    '/initial-access-tokens/:id',
    {
      schema: {
        operationId: 'revokeInitialAccessToken',
        summary: 'Revoke an initial access token',
        description: 'It registers nothing more; the clients it registered stay.',
        params: InitialAccessTokenParams,
        response: { 204: noBody('Revoked.') },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      await revokeInitialAccessTokenOf(app.db, app.clock.now(), request.developer.id, request.params.id);
      return reply.code(204).send();
    },
  );
}

/** `/v1/admin/registrations…` (docs/reference/rest-api.md#admin): the operator's review of openly registered clients. */
export async function registrationAdminRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/registrations/quarantined',
    { schema: { operationId: 'listQuarantinedClients', summary: 'List openly registered clients awaiting approval', response: { 200: json('The clients, oldest first.', QuarantinedClientList) } } },
    async () => ({ items: await listQuarantinedClients(app.db) }),
  );
  app.post(
    '/registrations/:client_id/approve',
    {
      schema: {
        operationId: 'approveClient',
        summary: 'Approve an openly registered client',
        description: 'The quarantine lifts and the client can sign people in.',
        params: QuarantinedClientParams,
        response: { 204: noBody('Approved.') },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      await approveClient(app.db, app.clock.now(), request.params.client_id, requestContext(request));
      return reply.code(204).send();
    },
  );
  app.delete(
    '/registrations/:client_id',
    {
      schema: {
        operationId: 'rejectClient',
        summary: 'Reject an openly registered client',
        description: 'A quarantined client is deleted; approved ones are not touched here.',
        params: QuarantinedClientParams,
        response: { 204: noBody('Deleted.') },
        errors: { 404: ['not_found'] },
      },
    },
    async (request, reply) => {
      await rejectClient(app.db, app.clock.now(), request.params.client_id, requestContext(request));
      return reply.code(204).send();
    },
  );
}
