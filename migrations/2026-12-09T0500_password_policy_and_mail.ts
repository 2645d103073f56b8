import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Per-app password policy and per-app mail (docs/guides/password-policy.md, docs/guides/app-mail.md).
// Additive: columns with defaults that keep today's behaviour, a new table and a nullable column the
// running version never reads.
// - apps: `password_min_length` (8), `password_character_classes` (0 = off), `password_max_age_days`
//   (NULL = never expires), `password_history_count` (0 = off), `mail_reply_to` (NULL = none) and
//   `mail_overrides` (JSON: per mail kind and locale, a subject and an intro; `{}` = none);
// - password_history: the argon2id hashes of a person's previous passwords (bounded per user by the
//   writer), removed with the account;
// - outbox.reply_to: the Reply-To of a mail, fixed when it is rendered.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').addColumn('password_min_length', 'integer', (c) => c.notNull().defaultTo(8)).execute();
  await db.schema.alterTable('apps').addColumn('password_character_classes', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('apps').addColumn('password_max_age_days', 'integer').execute();
  await db.schema.alterTable('apps').addColumn('password_history_count', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('apps').addColumn('mail_reply_to', 'text').execute();
  await db.schema.alterTable('apps').addColumn('mail_overrides', 'text', (c) => c.notNull().defaultTo('{}')).execute();
  await db.schema
    .createTable('password_history')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('user_id', 'text', (c) => c.notNull().references('users.id').onDelete('cascade'))
    .addColumn('password_hash', 'text', (c) => c.notNull())
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('password_history_user_idx').on('password_history').columns(['user_id', 'created_at']).execute();
  await db.schema.alterTable('outbox').addColumn('reply_to', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('outbox').dropColumn('reply_to').execute();
  await db.schema.dropTable('password_history').execute();
  for (const column of ['mail_overrides', 'mail_reply_to', 'password_history_count', 'password_max_age_days', 'password_character_classes', 'password_min_length']) {
    await db.schema.alterTable('apps').dropColumn(column).execute();
  }
}
