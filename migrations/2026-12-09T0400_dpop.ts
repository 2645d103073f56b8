import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// DPoP (RFC 9449), docs/reference/oauth.md. Additive:
// - `grants.dpop_jkt`: the key thumbprint a public client's refresh tokens are bound to (NULL = bearer);
// - `authorization_codes.dpop_jkt`: the key the code's redemption must prove (`dpop_jkt` at authorize);
// - `apps.dpop_bound_access_tokens`: per-app switch, 0 by default (the running version never reads it);
// - `seen_once`: keys seen once until they expire (DPoP proof `jti`s when Redis is not configured).
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('grants').addColumn('dpop_jkt', 'text').execute();
  await db.schema.alterTable('authorization_codes').addColumn('dpop_jkt', 'text').execute();
  await db.schema.alterTable('apps').addColumn('dpop_bound_access_tokens', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema
    .createTable('seen_once')
    .addColumn('key', 'text', (c) => c.primaryKey())
    .addColumn('expires_at', 'bigint', (c) => c.notNull())
    .execute();
  await db.schema.createIndex('seen_once_expires_idx').on('seen_once').column('expires_at').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.dropTable('seen_once').execute();
  await db.schema.alterTable('apps').dropColumn('dpop_bound_access_tokens').execute();
  await db.schema.alterTable('authorization_codes').dropColumn('dpop_jkt').execute();
  await db.schema.alterTable('grants').dropColumn('dpop_jkt').execute();
}
