import type { Kysely } from 'kysely';

/**
 * Multi-factor sign-in (docs/guides/mfa-and-passkeys.md):
 * - `totp_factors`: one authenticator app per user; the secret sealed with the service's SECRET_KEY;
 *   `last_step` is the last accepted 30-second step (a code is accepted once);
 * - `recovery_codes`: one-time codes, stored as SHA-256 hashes;
 * - `amr` (JSON array of RFC 8176 values) next to every `auth_time`: the browser session, the grant
 *   and the authorization code, so ID tokens say truthfully how the user authenticated;
 * - `apps.mfa`: the app's policy, 'off' | 'optional' | 'required'.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema
    .createTable('totp_factors')
    .addColumn('user_id', 'text', (c) => c.primaryKey().references('users.id').onDelete('cascade'))
    .addColumn('secret_sealed', 'text', (c) => c.notNull())
    .addColumn('confirmed_at', 'bigint')
    .addColumn('last_step', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema
    .createTable('recovery_codes')
    .addColumn('code_hash', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('used_at', 'bigint')
    .execute();
  await db.schema.createIndex('recovery_codes_user').on('recovery_codes').column('user_id').execute();
  await db.schema.alterTable('browser_sessions').addColumn('amr', 'text').execute();
  await db.schema.alterTable('grants').addColumn('amr', 'text').execute();
  await db.schema.alterTable('authorization_codes').addColumn('amr', 'text').execute();
  await db.schema.alterTable('apps').addColumn('mfa', 'text', (c) => c.notNull().defaultTo('optional')).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').dropColumn('mfa').execute();
  await db.schema.alterTable('authorization_codes').dropColumn('amr').execute();
  await db.schema.alterTable('grants').dropColumn('amr').execute();
  await db.schema.alterTable('browser_sessions').dropColumn('amr').execute();
  await db.schema.dropTable('recovery_codes').execute();
  await db.schema.dropTable('totp_factors').execute();
}
