import type { Kysely } from 'kysely';

// Frozen in time: never import application code here.
//
// Sessions and devices (docs/account/sessions.md): where a person is signed in, shown on /account and
// over REST. A browser session and a grant record the user agent (at most 512 characters) and the
// coarse area of the address it was created from (`ip_area`: IPv4 /24 "203.0.113.x", IPv6 /48; never
// the full address). An authorization code carries them from the browser that asked for it to the
// grant its redemption creates (the token request comes from the app's server, not the person's
// device). Additive: nullable columns the running version never reads.
const TABLES = ['browser_sessions', 'grants', 'authorization_codes'] as const;

export async function up(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) {
    await db.schema.alterTable(table).addColumn('user_agent', 'text').execute();
    await db.schema.alterTable(table).addColumn('ip_area', 'text').execute();
  }
}

export async function down(db: Kysely<any>): Promise<void> {
  for (const table of TABLES) {
    await db.schema.alterTable(table).dropColumn('ip_area').execute();
    await db.schema.alterTable(table).dropColumn('user_agent').execute();
  }
}
