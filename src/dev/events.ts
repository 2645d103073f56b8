import type { FastifyInstance } from 'fastify';
import type { Kysely } from 'kysely';
import { z } from 'zod';
import type { Database } from '../storage/schema.js';
import { isoTime } from '../shared/time.js';
import { listEventsVisibleToApp } from '../storage/repos/events.js';
import type { ZodTypeProvider } from '../plugins/validation.js';
import { EXAMPLE } from '../shared/examples.js';
import { json } from '../shared/responses.js';
import { PageLimit } from '../shared/schemas.js';

/**
 * `GET /v1/dev/apps/{id}/events?type&after&limit` (docs/reference/rest-api.md#developers, docs/reference/tokens.md#events): the app's audit events in
 * ascending order; the cursor is the last event id seen (`next_cursor`, null at the end).
 *
 * A developer can name its own app when signing in with any address, so the listing must not become
 * an account-existence oracle (SECURITY hardening item 8). It is filtered when read, which covers rows
 * written before the rule and whatever writers record in the future:
 * - `user_id` is shown only for users of the app (an `app_users` row); other events show `null`;
 * - about anyone else, only account-neutral events are listed (`user.login_failed`, `user.locked`:
 *   written the same way for unknown addresses), see `listEventsVisibleToApp`;
 * - `data` never carries `known_user` (or any other field in `PRIVATE_DATA_FIELDS`).
 */

/** `data` fields kept for the platform's own audit trail, never shown to developers. */
const PRIVATE_DATA_FIELDS = new Set(['known_user']);

function developerData(json: string): Record<string, unknown> {
  const data = JSON.parse(json) as Record<string, unknown>;
  return Object.fromEntries(Object.entries(data).filter(([key]) => !PRIVATE_DATA_FIELDS.has(key)));
}

export const EventsQuery = z.strictObject({
  type: z.string().regex(/^[a-z][a-z_.]{0,63}$/, 'must be an event type').optional(),
  after: z.string().regex(/^evt_[0-9a-z]{26}$/, 'must be a cursor returned as next_cursor').optional(),
  limit: PageLimit,
});

const AppParams = z.strictObject({ id: z.string().min(1).max(200) });

const Event = z
  .object({
    id: z.string(),
    type: z.string().describe('`user.registered`, `user.login_succeeded`, `consent.granted`, … (docs/reference/tokens.md#events).'),
    app_id: z.string().nullable(),
    user_id: z.string().nullable().describe('Only for users of the app.'),
    ip: z.string().nullable(),
    user_agent: z.string().nullable(),
    at: z.string(),
    data: z.record(z.string(), z.unknown()),
  })
  .meta({ id: 'Event', description: 'An audit event (docs/reference/tokens.md#events).' });

const EventPage = z.object({ items: z.array(Event), next_cursor: z.string().nullable().describe('Pass as `after` for the next page; null at the end.') });

/** One page of the app's events as its developer may see them (the query as EventsQuery parsed it). */
export async function listAppEventPage(db: Kysely<Database>, appId: string, query: z.output<typeof EventsQuery>) {
  const limit = query.limit ?? 50;
  const rows = await listEventsVisibleToApp(db, appId, { type: query.type, after: query.after, limit: limit + 1 });
  const page = rows.slice(0, limit);
  return {
    items: page.map((e) => ({
      id: e.id,
      type: e.type,
      app_id: e.app_id,
      user_id: e.member === 1 ? e.user_id : null,
      ip: e.ip,
      user_agent: e.user_agent,
      at: isoTime(Number(e.at)),
      data: developerData(e.data),
    })),
    next_cursor: rows.length > limit ? page[page.length - 1]!.id : null,
  };
}

/** A user's latest events at the app, newest first, as the developer may see them. */
export async function listUserEventsOfApp(db: Kysely<Database>, appId: string, userId: string, limit: number) {
  const rows = await listEventsVisibleToApp(db, appId, { userId, newestFirst: true, limit });
  return rows.map((e) => ({ id: e.id, type: e.type, ip: e.ip, at: isoTime(Number(e.at)), data: developerData(e.data) }));
}

export default async function devEventsRoutes(scope: FastifyInstance) {
  const app = scope.withTypeProvider<ZodTypeProvider>();
  app.get(
    '/apps/:id/events',
    {
      schema: {
        operationId: 'listAppEvents',
        summary: "List an app's audit events",
        description: 'Oldest first, from the cursor on.',
        params: AppParams,
        querystring: EventsQuery,
        response: { 200: json('One page of events.', EventPage) },
        errors: { 404: ['not_found'] },
        examples: {
          logins: {
            summary: 'Successful sign-ins',
            params: { id: EXAMPLE.appId },
            query: { type: 'user.login_succeeded', limit: '10' },
            status: 200,
            response: {
              items: [{ id: 'evt_01k2v6xd3f5h7k9m1p3r5t7v9x', type: 'user.login_succeeded', app_id: EXAMPLE.appId, user_id: EXAMPLE.userId, ip: '203.0.113.7', user_agent: 'curl/8.5.0', at: EXAMPLE.time, data: { method: 'password' } }],
              next_cursor: null,
            },
          },
        },
      },
    },
    async (request) => {
      const owned = await app.requireOwnedApp(request, request.params.id);
      return listAppEventPage(app.db, owned.id, request.query);
    },
  );
}
