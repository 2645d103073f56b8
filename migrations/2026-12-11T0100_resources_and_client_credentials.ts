import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Resource indicators (RFC 8707) and client credentials, docs/reference/oauth.md#resource-indicators-rfc-8707. Additive:
// - `apps.resource_uris`: JSON array of the API URIs the app may ask tokens for, `[]` by default;
// - `apps.client_credentials`: per-app switch, 0 by default; `apps.client_credentials_scopes`: the scopes it may ask, '' by default;
// - `apps.client_credentials_not_before`: client-credentials tokens issued at or before it are revoked (NULL: none);
// - `authorization_codes.resources`, `grants.resources`: the resources authorized (space-separated; NULL: none asked).
// The running version never reads them: its tokens keep `aud` = client_id, and it offers no client credentials.
export async function up(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('apps').addColumn('resource_uris', 'text', (c) => c.notNull().defaultTo('[]')).execute();
  await db.schema.alterTable('apps').addColumn('client_credentials', 'integer', (c) => c.notNull().defaultTo(0)).execute();
  await db.schema.alterTable('apps').addColumn('client_credentials_scopes', 'text', (c) => c.notNull().defaultTo('')).execute();
  await db.schema.alterTable('apps').addColumn('client_credentials_not_before', 'bigint').execute();
  await db.schema.alterTable('authorization_codes').addColumn('resources', 'text').execute();
  await db.schema.alterTable('grants').addColumn('resources', 'text').execute();
}

export async function down(db: Kysely<any>): Promise<void> {
  await db.schema.alterTable('grants').dropColumn('resources').execute();
  await db.schema.alterTable('authorization_codes').dropColumn('resources').execute();
  await db.schema.alterTable('apps').dropColumn('client_credentials_not_before').execute();
  await db.schema.alterTable('apps').dropColumn('client_credentials_scopes').execute();
  await db.schema.alterTable('apps').dropColumn('client_credentials').execute();
  await db.schema.alterTable('apps').dropColumn('resource_uris').execute();
}
