import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Webhooks per app (docs/webhooks.md): the endpoints a developer registers, and one delivery row per
// (event, endpoint), written in the transaction of the change it reports and drained by the background
// deliverer. Additive: two new tables and their indexes, which the running version never reads.
export async function up(db: Kysely<any>): Promise<void> {
  const s = db.schema;
  await s
    .createTable('webhook_endpoints')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('url', 'text', (c) => c.notNull())
    .addColumn('description', 'text')
    // JSON string[] of webhook types; [] = every type.
    .addColumn('event_types', 'text', (c) => c.notNull())
    .addColumn('enabled', 'integer', (c) => c.notNull().defaultTo(1))
    // Sealed with SECRET_KEY, as TOTP secrets are.
    .addColumn('secret_sealed', 'text', (c) => c.notNull())
    .addColumn('previous_secret_sealed', 'text')
    .addColumn('previous_secret_expires_at', 'bigint')
    .addColumn('failing_since', 'bigint')
    .addColumn('disabled_reason', 'text')
    .addColumn('disabled_at', 'bigint')
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('updated_at', 'bigint', (c) => c.notNull())
    .execute();
  await s.createIndex('webhook_endpoints_app_idx').on('webhook_endpoints').columns(['app_id', 'enabled']).execute();

  await s
    .createTable('webhook_deliveries')
    .addColumn('id', 'text', (c) => c.primaryKey())
    .addColumn('endpoint_id', 'text', (c) => c.notNull())
    .addColumn('app_id', 'text', (c) => c.notNull())
    .addColumn('event_id', 'text')
    // The user it is about (NULL for a test event): an account's purge deletes its log entries.
    .addColumn('user_id', 'text')
    .addColumn('type', 'text', (c) => c.notNull())
    .addColumn('payload', 'text', (c) => c.notNull())
    .addColumn('status', 'text', (c) => c.notNull())
    .addColumn('attempts', 'integer', (c) => c.notNull().defaultTo(0))
    .addColumn('created_at', 'bigint', (c) => c.notNull())
    .addColumn('next_attempt_at', 'bigint', (c) => c.notNull())
    .addColumn('locked_until', 'bigint')
    .addColumn('last_attempt_at', 'bigint')
    .addColumn('last_status_code', 'integer')
    .addColumn('last_error', 'text')
    .addColumn('last_response', 'text')
    .addColumn('delivered_at', 'bigint')
    .execute();
  await s.createIndex('webhook_deliveries_due_idx').on('webhook_deliveries').columns(['status', 'next_attempt_at']).execute();
  await s.createIndex('webhook_deliveries_user_idx').on('webhook_deliveries').column('user_id').execute();
  await s.createIndex('webhook_deliveries_endpoint_idx').on('webhook_deliveries').columns(['endpoint_id', 'created_at']).execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('webhook_deliveries').execute();
  await db.schema.dropTable('webhook_endpoints').execute();
}
