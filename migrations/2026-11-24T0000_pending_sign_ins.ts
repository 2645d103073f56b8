import type { Kysely } from 'kysely';

/**
 * A grant opened by a REST sign-in that still waits for profile data or a verified email
 * (`pending`): `POST /v1/auth/profile/complete` may finish exactly such a grant, once.
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('grants').addColumn('awaiting_completion', 'integer', (c) => c.notNull().defaultTo(0)).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('grants').dropColumn('awaiting_completion').execute();
}
