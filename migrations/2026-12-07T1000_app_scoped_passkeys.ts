import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Passkeys registered through an app's access token (`POST /v1/auth/passkey/register/*`) belong to that
// app alone: `app_id` names it, NULL is an account-wide passkey added on the hosted account page. A
// passkey an app registered signs in only at that app and is no second factor of the account (an app's
// token must never add a credential that opens the account everywhere).
//
// Additive: a nullable column. The data step scopes the passkeys the API door registered before this
// version (their `passkey.registered` event says `via: "api"` and names the app), then drops recovery
// codes that no longer back up an account-wide factor (they were handed out with such a passkey), and
// unconfirmed authenticator-app secrets (an enrolment in progress now belongs to the session that
// started it, in `one_time_tokens`; one left here could have been planted by anyone with the password).
//
// data: passkeys registered through an app get that app's id, and unconfirmed authenticator secrets and
// orphaned recovery codes are deleted; a running version ignores `app_id` and never needed those rows.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .alterTable('passkeys')
    .addColumn('app_id', 'text', (c) => c.references('apps.id').onDelete('cascade'))
    .execute();

  const registered: Array<{ app_id: string | null; data: string }> = await db
    .selectFrom('events')
    .select(['app_id', 'data'])
    .where('type', '=', 'passkey.registered')
    .where('app_id', 'is not', null)
    .execute();
  for (const event of registered) {
    let data: { passkey_id?: unknown; via?: unknown };
    try {
      data = JSON.parse(event.data) as typeof data;
    } catch {
      continue;
    }
    if (data.via !== 'api' || typeof data.passkey_id !== 'string') continue;
    await db.updateTable('passkeys').set({ app_id: event.app_id }).where('id', '=', data.passkey_id).where('app_id', 'is', null).execute();
  }

  await db.deleteFrom('totp_factors').where('confirmed_at', 'is', null).execute();
  await db
    .deleteFrom('recovery_codes')
    .where('user_id', 'not in', db.selectFrom('totp_factors').select('user_id').where('confirmed_at', 'is not', null))
    .where('user_id', 'not in', db.selectFrom('passkeys').select('user_id').where('app_id', 'is', null))
    .execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('passkeys').dropColumn('app_id').execute();
}
