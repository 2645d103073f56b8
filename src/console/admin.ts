import type { FastifyInstance } from 'fastify';
import { z } from 'zod';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { EXAMPLE } from '../shared/examples.js';
import { requestContext } from '../shared/request-context.js';
import { json } from '../shared/responses.js';
import { createInvitation, INVITATION_TTL_SECONDS } from './service.js';

const DeveloperParams = z.strictObject({ id: z.string().min(1).max(200) });
const Invitation = z
  .object({
    url: z.string().describe('The console link; the signed-in user who opens it and accepts becomes the developer account. Works once.'),
    expires_at: z.string(),
  })
  .meta({ id: 'DeveloperInvitation', description: 'A one-time link to the developer console.' });

/** `POST /v1/admin/developers/{id}/invitation` (issue 15), inside the admin scope. */
export default async function consoleAdminRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.post(
    '/developers/:id/invitation',
    {
      schema: {
        operationId: 'inviteDeveloper',
        summary: 'Make a one-time console link for a developer',
        description: `Whoever opens the link signed in, and accepts, becomes the developer's user account (one account per developer). It expires after ${INVITATION_TTL_SECONDS / 86_400} days.`,
        params: DeveloperParams,
        response: { 201: json('The link, shown only here.', Invitation) },
        errors: { 404: ['not_found'] },
        examples: {
          invite: {
            summary: 'An invitation',
            params: { id: EXAMPLE.developerId },
            status: 201,
            response: { url: 'http://localhost:3000/console/invitation?token=inv_Q2x8mV4pL1nB7zR5tW9yC3fJ6dG0sH2k', expires_at: EXAMPLE.time },
          },
        },
      },
    },
    async (request, reply) => {
      reply.code(201);
      return createInvitation(app.db, app.config, app.clock.now(), request.params.id, requestContext(request));
    },
  );
}
