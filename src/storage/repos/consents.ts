import type { Kysely } from 'kysely';
import { joinScope, scopeList } from '../../shared/scopes.js';
import { precompiled } from '../precompiled.js';
import type { Database } from '../schema.js';

/** The scopes a user has consented to for an app ('' when none). */
export async function findConsentedScope(db: Kysely<Database>, appId: string, userId: string): Promise<string> {
  return (await selectConsentedScope(db, appId, userId)).rows[0]?.scope ?? '';
}

const selectConsentedScope = precompiled((db, appId: string, userId: string) =>
  db.selectFrom('consents').select('scope').where('app_id', '=', appId).where('user_id', '=', userId),
);

/** Records consent for `scope`, keeping what was consented before (the union). */
export async function grantConsent(db: Kysely<Database>, appId: string, userId: string, scope: string, at: number): Promise<void> {
  const merged = joinScope([...scopeList(await findConsentedScope(db, appId, userId)), ...scopeList(scope)]);
  await db
    .insertInto('consents')
    .values({ app_id: appId, user_id: userId, scope: merged, created_at: at, updated_at: at })
    .onConflict((oc) => oc.columns(['app_id', 'user_id']).doUpdateSet({ scope: merged, updated_at: at }))
    .execute();
}

export async function revokeConsent(db: Kysely<Database>, appId: string, userId: string): Promise<boolean> {
  const result = await db.deleteFrom('consents').where('app_id', '=', appId).where('user_id', '=', userId).executeTakeFirst();
  return Number(result.numDeletedRows) === 1;
}

/** Removes every consent of a user (an account claimed by its mailbox owner keeps no consent given before). */
export async function revokeConsentsOfUser(db: Kysely<Database>, userId: string): Promise<void> {
  await db.deleteFrom('consents').where('user_id', '=', userId).execute();
}
