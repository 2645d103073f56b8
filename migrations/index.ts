import type { Migration } from 'kysely';
import * as init from './2026-11-21T0000_init.js';
import * as listingIndexesPostgres from './2026-11-21T0100_listing_indexes.postgres.js';
import * as listingIndexesSqlite from './2026-11-21T0100_listing_indexes.sqlite.js';
import * as pendingSignIns from './2026-11-24T0000_pending_sign_ins.js';
import * as purgeIndexes from './2026-11-24T0500_purge_indexes.js';
import * as oneActiveSigningKey from './2026-11-24T1000_one_active_signing_key.js';
import * as multiFactor from './2026-11-24T1200_multi_factor.js';
import * as passkeys from './2026-11-24T1300_passkeys.js';
import * as appBranding from './2026-11-24T1400_app_branding.js';
import * as developerConsole from './2026-11-24T1400_developer_console.js';
import * as appScopedPasskeys from './2026-12-07T1000_app_scoped_passkeys.js';
import * as darkLogo from './2026-12-07T1600_dark_logo.js';
import * as webhooks from './2026-12-08T0100_webhooks.js';
import * as sessions from './2026-12-08T0200_sessions.js';
import * as accountDeletion from './2026-12-08T0300_account_deletion.js';
import * as userImport from './2026-12-09T0100_user_import.js';
import * as locales from './2026-12-09T0300_locales.js';
import * as dpop from './2026-12-09T0400_dpop.js';
import * as backchannelLogout from './2026-12-09T0200_backchannel_logout.js';
import * as passwordPolicyAndMail from './2026-12-09T0500_password_policy_and_mail.js';
import * as par from './2026-12-10T0100_par.js';
import * as dynamicRegistration from './2026-12-11T0300_dynamic_registration.js';
import * as deviceAuthorization from './2026-12-11T0200_device_authorization.js';
import * as resourcesAndClientCredentials from './2026-12-11T0100_resources_and_client_credentials.js';

export type MigrationDialect = 'sqlite' | 'postgres';

/**
 * Every migration by name; they run in name (ISO timestamp) order. A migration is portable (`all`),
 * or has per-dialect variants where the SQL really differs. A static list, so the same code works
 * from the TypeScript sources and from the compiled build.
 */
const MIGRATIONS: Record<string, Partial<Record<'all' | MigrationDialect, Migration>>> = {
  '2026-11-21T0000_init': { all: init },
  '2026-11-21T0100_listing_indexes': { sqlite: listingIndexesSqlite, postgres: listingIndexesPostgres },
  '2026-11-24T0000_pending_sign_ins': { all: pendingSignIns },
  '2026-11-24T0500_purge_indexes': { all: purgeIndexes },
  '2026-11-24T1000_one_active_signing_key': { all: oneActiveSigningKey },
  '2026-11-24T1200_multi_factor': { all: multiFactor },
  '2026-11-24T1300_passkeys': { all: passkeys },
  '2026-11-24T1400_app_branding': { all: appBranding },
  '2026-11-24T1400_developer_console': { all: developerConsole },
  '2026-12-07T1000_app_scoped_passkeys': { all: appScopedPasskeys },
  '2026-12-07T1600_dark_logo': { all: darkLogo },
  '2026-12-08T0100_webhooks': { all: webhooks },
  '2026-12-08T0200_sessions': { all: sessions },
  '2026-12-08T0300_account_deletion': { all: accountDeletion },
  '2026-12-09T0100_user_import': { all: userImport },
  '2026-12-09T0300_locales': { all: locales },
  '2026-12-09T0400_dpop': { all: dpop },
  '2026-12-09T0200_backchannel_logout': { all: backchannelLogout },
  '2026-12-09T0500_password_policy_and_mail': { all: passwordPolicyAndMail },
  '2026-12-10T0100_par': { all: par },
  '2026-12-11T0300_dynamic_registration': { all: dynamicRegistration },
  '2026-12-11T0200_device_authorization': { all: deviceAuthorization },
  '2026-12-11T0100_resources_and_client_credentials': { all: resourcesAndClientCredentials },
};

export function migrationsFor(dialect: MigrationDialect): Record<string, Migration> {
  const out: Record<string, Migration> = {};
  for (const [name, variants] of Object.entries(MIGRATIONS)) {
    const migration = variants[dialect] ?? variants.all;
    if (migration) out[name] = migration;
  }
  return out;
}
