import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Languages of the hosted pages: a person's own choice (`users.locale`, a BCP 47 tag such as `es` or
// `zh-TW`; NULL = none saved) and an app's default (`apps.default_locale`; NULL = English). Additive:
// nullable columns the running version never reads.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('users').addColumn('locale', 'text').execute();
  await db.schema.alterTable('apps').addColumn('default_locale', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').dropColumn('default_locale').execute();
  await db.schema.alterTable('users').dropColumn('locale').execute();
}
