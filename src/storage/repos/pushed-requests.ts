import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/**
 * Pushed authorization requests (RFC 9126, docs/reference/oauth.md#pushed-authorization-requests-rfc-9126):
 * stored by the SHA-256 of their `request_uri`, consumed once by a conditional UPDATE.
 */

export interface PushedRequest {
  appId: string;
  params: Record<string, string>;
  expiresAt: number;
}

export async function insertPushedRequest(db: Kysely<Database>, row: { uriHash: string; appId: string; params: Record<string, string>; now: number; expiresAt: number }): Promise<void> {
  await db
    .insertInto('pushed_authorization_requests')
    .values({ uri_hash: row.uriHash, app_id: row.appId, params: JSON.stringify(row.params), created_at: row.now, expires_at: row.expiresAt, consumed_at: null })
    .execute();
}

/**
 * Marks the request used and returns it, whoever presents it and whatever the checks that follow decide
 * (single use on every path); undefined when unknown or already used.
 */
export async function consumePushedRequest(db: Kysely<Database>, uriHash: string, now: number): Promise<PushedRequest | undefined> {
  const row = await db
    .updateTable('pushed_authorization_requests')
    .set({ consumed_at: now })
    .where('uri_hash', '=', uriHash)
    .where('consumed_at', 'is', null)
    .returning(['app_id', 'params', 'expires_at'])
    .executeTakeFirst();
  return row ? { appId: row.app_id, params: JSON.parse(row.params) as Record<string, string>, expiresAt: row.expires_at } : undefined;
}
