import type { Kysely } from 'kysely';
import type { Database } from '../schema.js';

/** Small JSON settings by key (table `settings`). */

export async function getSetting<T>(db: Kysely<Database>, key: string): Promise<T | undefined> {
  const row = await db.selectFrom('settings').select('value').where('key', '=', key).executeTakeFirst();
  return row ? (JSON.parse(row.value) as T) : undefined;
}

/** Creates or replaces a setting. */
export async function putSetting(db: Kysely<Database>, key: string, value: unknown, at: number): Promise<void> {
  const json = JSON.stringify(value);
  await db
    .insertInto('settings')
    .values({ key, value: json, updated_at: at })
    .onConflict((oc) => oc.column('key').doUpdateSet({ value: json, updated_at: at }))
    .execute();
}

/** Removes a setting; returns whether one existed. */
export async function deleteSetting(db: Kysely<Database>, key: string): Promise<boolean> {
  const result = await db.deleteFrom('settings').where('key', '=', key).executeTakeFirst();
  return Number(result.numDeletedRows) > 0;
}

/**
 * The provider configuration set through `gatehouse idp set` or `PUT /v1/admin/idp` (docs/reference/rest-api.md#admin),
 * stored under IDP_SETTING_KEY. The client secret is sealed with `new SecretBox(SECRET_KEY, IDP_SECRET_PURPOSE)`.
 * Environment variables (`IDP_*`) win over this setting.
 */
export const IDP_SETTING_KEY = 'idp';
export const IDP_SECRET_PURPOSE = 'idp-client-secret';

export interface IdpSetting {
  issuer: string;
  client_id: string;
  /** Sealed; null for a provider that needs no client secret (public client + PKCE). */
  client_secret_sealed: string | null;
  audiences: string[];
  name: string;
}
