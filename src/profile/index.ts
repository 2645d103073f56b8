import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { requestContext } from '../shared/request-context.js';
import { answerPreflight, corsOnSend, headerClientId } from '../plugins/cors.js';
import type { AppAccess } from '../storage/repos/apps.js';
import { liveGrantsWithProfile } from '../storage/repos/grants.js';
import type { ProfileRecord } from '../storage/repos/profiles.js';
import type { BearerIdentity } from '../tokens/service.js';
import { EXAMPLE } from '../shared/examples.js';
import { json, noBody, shareRouteDocs } from '../shared/responses.js';
import { PROFILE_BODY_LIMIT, ProfileBody, ProfileHeaders, ProfileParams, ProfileResponse } from './schemas.js';
import { etagOf, parseIfMatch, removeProfile, toProfileView, validateProfileBody, writeProfile } from './service.js';
import type { ZodTypeProvider } from '../plugins/validation.js';

/**
 * The profile cache `/v1/profile/{userId}` (docs/reference/rest-api.md#profile-cache): one JSON document per (app, user).
 * Every method runs the contract's checks in order, in onRequest (before the body is even parsed):
 * bearer access token (401) → X-Client-Id present and single (400) and equal to the token's client
 * (403 client_mismatch) → app has Auth and Profile (403 feature_disabled) → userId = sub (403 forbidden).
 */

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the profile scope's onRequest checks: the caller's app and user. */
    profileCaller?: { app: AppAccess; userId: string };
    /** Set by checkReader: the caller's document, read with the grant's liveness (undefined: none stored). */
    profileRead?: ProfileRecord;
  }
}

const CLIENT_ID = /^[A-Za-z0-9._~-]{1,200}$/;

/** The single `X-Client-Id` value; a missing, repeated or malformed header is 400 invalid_request. */
function clientIdValues(request: FastifyRequest): string[] {
  const raw = request.headers['x-client-id'];
  if (raw === undefined) return [];
  // Node joins a repeated header with ", "; client ids never contain a comma.
  return [raw].flat().flatMap((v) => String(v).split(','));
}

function clientIdHeader(request: FastifyRequest): string {
  const values = clientIdValues(request);
  if (values.length === 0) throw new AppError('invalid_request', { details: [{ path: 'headers.x-client-id', message: 'is required' }] });
  if (values.length > 1) throw new AppError('invalid_request', { details: [{ path: 'headers.x-client-id', message: 'must be sent once' }] });
  const value = values[0]!.trim();
  if (!CLIENT_ID.test(value)) throw new AppError('invalid_request', { details: [{ path: 'headers.x-client-id', message: 'is malformed' }] });
  return value;
}

/** The checks after the bearer token's (see the module comment), in order: 400, 403. */
function admitCaller(request: FastifyRequest, identity: BearerIdentity): void {
  const clientId = clientIdHeader(request);
  if (clientId !== identity.appId) throw new AppError('client_mismatch', { detail: `token for ${identity.appId}, header ${clientId}` });
  const app = identity.grant.app;
  if (app.disabled) throw new AppError('unauthorized', { detail: `app ${clientId} missing or disabled` });
  if (!app.features.auth || !app.features.profile) throw new AppError('feature_disabled', { detail: `app ${clientId} lacks auth/profile` });
  const { userId } = request.params as { userId?: string };
  if (userId !== identity.userId) throw new AppError('forbidden', { detail: 'userId is not the token subject' });
  request.profileCaller = { app, userId: identity.userId };
  request.corsAppId = app.id;
}

async function checkCaller(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  admitCaller(request, await request.server.tokens.authenticate(request, { reply }));
}

/**
 * checkCaller for a read: the caller's document comes in the same statement as the grant's liveness (one
 * statement a read). It is the grant user's, and admitCaller has checked that this is the `userId` asked for.
 */
async function checkReader(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  const identity = await request.server.tokens.authenticate(request, { readGrant: liveGrantsWithProfile, reply });
  admitCaller(request, identity);
  request.profileRead = identity.grant.profile;
}

export default async function profileRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  const now = () => app.clock.now();

  // CORS (docs/reference/rest-api.md#cors): the origins of the app named by X-Client-Id, on answers and errors alike.
  app.addHook('onSend', corsOnSend({ appIdOf: headerClientId, unnamed: 'none' }));
  // The caller checks (see checkCaller), in order: 401, 400, 403.
  app.addHook('onRoute', (route) =>
    shareRouteDocs(route, {
      tags: ['profile'],
      security: [{ accessToken: [] }],
      errors: { 400: ['invalid_request'], 401: ['unauthorized'], 403: ['client_mismatch', 'feature_disabled', 'forbidden'] },
    }),
  );
  const guarded = { onRequest: checkCaller };
  const etag = { ETag: { description: 'The version, `"<version>"`.', type: 'string' } };
  const profileExample = { userId: EXAMPLE.userId, data: { theme: 'dark', favourites: [3, 14] }, updated_at: EXAMPLE.time, version: 1 };
  const target = { params: { userId: EXAMPLE.userId }, headers: { 'x-client-id': EXAMPLE.appId } };

  app.get(
    '/:userId',
    {
      onRequest: checkReader,
      schema: {
        operationId: 'getProfile',
        summary: 'Read the profile document',
        params: ProfileParams,
        headers: ProfileHeaders,
        response: {
          200: json('The document.', ProfileResponse, etag),
          304: noBody('Unchanged since the `If-None-Match` entity tag.'),
        },
        errors: { 404: ['profile_not_found'] },
        examples: {
          read: { summary: 'The stored document', ...target, status: 200, response: profileExample },
        },
      },
    },
    async (request, reply) => {
      const profile = request.profileRead;
      if (!profile) throw new AppError('profile_not_found');
      const etag = etagOf(profile.version);
      reply.header('etag', etag).header('cache-control', 'no-store');
      const ifNoneMatch = request.headers['if-none-match'];
      if (typeof ifNoneMatch === 'string' && ifNoneMatch.split(',').some((t) => t.trim() === etag || t.trim() === '*')) {
        return reply.code(304).send();
      }
      return toProfileView(profile);
    },
  );

  app.put(
    '/:userId',
    {
      ...guarded,
      bodyLimit: PROFILE_BODY_LIMIT,
      schema: {
        operationId: 'putProfile',
        summary: 'Replace the profile document',
        params: ProfileParams,
        headers: ProfileHeaders,
        body: ProfileBody,
        response: { 200: json('The stored document.', ProfileResponse, etag) },
        errors: { 412: ['precondition_failed'] },
        examples: {
          write: { summary: 'Store a document', ...target, body: { data: profileExample.data }, status: 200, response: profileExample },
        },
      },
    },
    async (request, reply) => {
      const { app: client, userId } = request.profileCaller!;
      const data = validateProfileBody(request.body);
      const record = await writeProfile(app.db, {
        appId: client.id,
        userId,
        data,
        at: now(),
        ifMatch: parseIfMatch(request),
        ctx: requestContext(request),
      });
      reply.header('etag', etagOf(record.version)).header('cache-control', 'no-store');
      return toProfileView(record);
    },
  );

  app.delete(
    '/:userId',
    {
      ...guarded,
      schema: {
        operationId: 'deleteProfile',
        summary: 'Delete the profile document',
        params: ProfileParams,
        headers: ProfileHeaders,
        response: { 204: noBody('Deleted (also when there was none).') },
        errors: { 412: ['precondition_failed'] },
        examples: { remove: { summary: 'Delete', ...target, status: 204 } },
      },
    },
    async (request, reply) => {
      const { app: client, userId } = request.profileCaller!;
      await removeProfile(app.db, { appId: client.id, userId, at: now(), ifMatch: parseIfMatch(request), ctx: requestContext(request) });
      return reply.code(204).send();
    },
  );

  app.options('/:userId', answerPreflight);
}
