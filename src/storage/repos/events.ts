import type { Kysely } from 'kysely';
import { newId } from '../../shared/ids.js';
import type { Database, EventRow } from '../schema.js';

/** Audit event types of CONTRACT §11. */
export type EventType =
  | 'user.registered'
  | 'user.login_succeeded'
  | 'user.login_failed'
  | 'user.locked'
  | 'token.refresh_reuse_detected'
  | 'code.replay_detected'
  | 'idp.bound'
  | 'idp.unbound'
  | 'password.reset_requested'
  | 'password.reset'
  | 'email.verified'
  | 'consent.granted'
  | 'consent.revoked'
  | 'profile.updated'
  | 'profile.deleted'
  | 'app.user_blocked'
  | 'app.user_unblocked';

export interface EventInput {
  type: EventType;
  appId?: string | null;
  userId?: string | null;
  ip?: string | null;
  userAgent?: string | null;
  /** Never a password, token, code or secret. */
  data?: Record<string, unknown>;
}

export async function appendEvent(db: Kysely<Database>, at: number, event: EventInput): Promise<void> {
  await db
    .insertInto('events')
    .values({
      id: newId('evt'),
      type: event.type,
      app_id: event.appId ?? null,
      user_id: event.userId ?? null,
      ip: event.ip ?? null,
      user_agent: event.userAgent ? event.userAgent.slice(0, 512) : null,
      at,
      data: JSON.stringify(event.data ?? {}),
    })
    .execute();
}

export async function listEventsOfApp(
  db: Kysely<Database>,
  appId: string,
  options: { type?: string; after?: string; limit: number },
): Promise<EventRow[]> {
  let q = db.selectFrom('events').selectAll().where('app_id', '=', appId);
  if (options.type) q = q.where('type', '=', options.type);
  if (options.after) q = q.where('id', '>', options.after);
  return q.orderBy('id', 'asc').limit(options.limit).execute();
}
