import type { Kysely } from 'kysely';
import { AWAITING } from './grants.js';
import type { Database } from '../schema.js';

/**
 * Where a person is signed in (docs/account/sessions.md): their live browser sessions of the hosted
 * pages and their live grants (an app's sign-in: a refresh-token family or a session JWT). Only the
 * columns the list shows: never the CSRF token, the page state or a token hash beyond the session's
 * own lookup key (the service derives the public id from it and never shows it).
 */

export interface SignedInBrowser {
  id_hash: string;
  created_at: number;
  last_seen_at: number;
  user_agent: string | null;
  ip_area: string | null;
}

export interface SignedInGrant {
  id: string;
  app_id: string;
  app_name: string;
  created_at: number;
  /** The newest refresh token's creation (what the rotation writes anyway), else the grant's creation. */
  last_seen_at: number;
  user_agent: string | null;
  ip_area: string | null;
}

/** Live browser sessions of a user (not revoked, not expired), newest first. */
export async function listSignedInBrowsers(db: Kysely<Database>, userId: string, now: number): Promise<SignedInBrowser[]> {
  return db
    .selectFrom('browser_sessions')
    .select(['id_hash', 'created_at', 'last_seen_at', 'user_agent', 'ip_area'])
    .where('user_id', '=', userId)
    .where('revoked_at', 'is', null)
    .where('expires_at', '>', now)
    .orderBy('last_seen_at', 'desc')
    .orderBy('created_at', 'desc')
    .execute();
}

/**
 * Live, completed grants of a user (isGrantLive's rule, not waiting for a step), optionally of one app
 * only, with the app's name; most recently used first. A grant waiting for its second factor or a
 * pending REST sign-in is no sign-in yet, so it is not listed.
 */
export async function listSignedInGrants(db: Kysely<Database>, userId: string, now: number, appId?: string): Promise<SignedInGrant[]> {
  let q = db
    .selectFrom('grants as g')
    .innerJoin('apps as a', 'a.id', 'g.app_id')
    .select((eb) => [
      'g.id',
      'g.app_id',
      'a.name as app_name',
      'g.created_at',
      'g.user_agent',
      'g.ip_area',
      eb.fn
        .coalesce(eb.selectFrom('refresh_tokens as t').select((t) => t.fn.max('t.created_at').as('m')).whereRef('t.grant_id', '=', 'g.id'), 'g.created_at')
        .as('last_seen_at'),
    ])
    .where('g.user_id', '=', userId)
    .where('g.revoked_at', 'is', null)
    .where('g.expires_at', '>', now)
    .where('g.awaiting_completion', '=', AWAITING.nothing);
  if (appId !== undefined) q = q.where('g.app_id', '=', appId);
  const rows = await q.execute();
  return rows
    .map((r) => ({ ...r, last_seen_at: Number(r.last_seen_at) }))
    .sort((a, b) => b.last_seen_at - a.last_seen_at || b.created_at - a.created_at);
}
