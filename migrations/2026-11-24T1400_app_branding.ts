import type { Kysely } from 'kysely';

/**
 * Per-app branding of the hosted pages: `logo_url` (an https URL) and `accent_color` (`#rrggbb`),
 * both optional (NULL = the Gatehouse look).
 */
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').addColumn('logo_url', 'text').execute();
  await db.schema.alterTable('apps').addColumn('accent_color', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').dropColumn('accent_color').execute();
  await db.schema.alterTable('apps').dropColumn('logo_url').execute();
}
