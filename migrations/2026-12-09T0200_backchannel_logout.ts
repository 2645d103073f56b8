import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// OpenID Connect Back-Channel Logout 1.0 (docs/guides/back-channel-logout.md):
// - an app may register `backchannel_logout_uri` and `backchannel_logout_session_required`;
// - a browser session carries the public `sid` its ID tokens name (kept across re-authentication), an
//   authorization code carries it to the grant its redemption creates, and a grant remembers it;
// - one delivery row per logout token to send, written in the transaction of the revocation and drained
//   by the background deliverer.
// Additive: nullable columns (or with a default) and a new table, which the running version never reads.
export async function up(db: Kysely<any>): Promise<void> {
  const s = db.schema;
  await s.alterTable('apps').addColumn('backchannel_logout_uri', 'text').execute();
  await s.alterTable('apps').addColumn('backchannel_logout_session_required', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  for (const table of ['browser_sessions', 'authorization_codes', 'grants']) await s.alterTable(table).addColumn('sid', 'text').execute();
  // A browser session's sign-out revokes the grants it signed in.
  await s.createIndex('grants_user_sid_idx').on('grants').columns(['user_id', 'sid']).execute();

  await s
    .createTable('logout_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('user_id', 'text', (c) => c.notNull())
    .addColumn('sid', 'text')
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_until', 'bigint')
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('delivered_at', 'bigint')
    .execute();
  await s.createIndex('logout_deliveries_due_idx').on('logout_deliveries').columns(['status', 'next_attempt_at']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('logout_deliveries').execute();
  await db.schema.dropIndex('grants_user_sid_idx').execute();
  for (const table of ['grants', 'authorization_codes', 'browser_sessions']) await db.schema.alterTable(table).dropColumn('sid').execute();
  await db.schema.alterTable('apps').dropColumn('backchannel_logout_session_required').execute();
  await db.schema.alterTable('apps').dropColumn('backchannel_logout_uri').execute();
}
