import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// An app's logo for the dark colour scheme (`logo_url_dark`, an https URL; NULL = the one logo for
// both): a dark wordmark vanishes on a dark page. Additive: a nullable column the running version
// never reads.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').addColumn('logo_url_dark', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').dropColumn('logo_url_dark').execute();
}
