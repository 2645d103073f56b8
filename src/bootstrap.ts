import type { Kysely } from 'kysely';
import type { ResolvedConfig } from './config.js';
import { createDeveloper } from './admin/service.js';
import { createInvitation } from './console/service.js';
import { createApp } from './dev/service.js';
import { AppError } from './errors.js';
import { hasAnyDeveloper } from './storage/repos/developers.js';
import type { Database } from './storage/schema.js';

export const BOOTSTRAP_DEVELOPER_EMAIL = 'bootstrap@localhost';
export const DEMO_APP_NAME = 'demo';

export interface FirstStartResult {
  developerId: string;
  apiKey: string;
  demoClientId: string;
  /** A one-time link that makes whoever opens it (signed in) the bootstrap developer's console account. */
  consoleInvitation: string;
}

/**
 * First start (CONTRACT §0): with no ADMIN_TOKEN and no developer yet, creates the bootstrap developer
 * and the public `demo` app (redirect URI `{base_url}/demo/callback`) in one transaction. Idempotent;
 * when several processes start together the unique developer email lets exactly one of them win.
 * Returns what was created (the API key exists nowhere else), or null when there was nothing to do.
 */
export async function runFirstStart(db: Kysely<Database>, config: ResolvedConfig, now: number): Promise<FirstStartResult | null> {
  if (config.adminToken || (await hasAnyDeveloper(db))) return null;
  try {
    return await db.transaction().execute(async (trx) => {
      const developer = await createDeveloper(trx, now, { email: BOOTSTRAP_DEVELOPER_EMAIL, name: 'Bootstrap developer' });
      const demo = await createApp(trx, now, developer.id, {
        name: DEMO_APP_NAME,
        type: 'public',
        redirect_uris: [`${config.baseUrl}/demo/callback`],
        features: { auth: true, profile: true },
        required_fields: [],
        allowed_origins: [],
        mfa: 'optional',
      });
      const invitation = await createInvitation(trx, config, now, developer.id, {});
      return { developerId: developer.id, apiKey: developer.api_key, demoClientId: demo.client_id, consoleInvitation: invitation.url };
    });
  } catch (error) {
    // Another process created the bootstrap developer first.
    if (error instanceof AppError && error.code === 'conflict') return null;
    throw error;
  }
}

/** Runs the first start and prints its one-time notice straight to stdout (not the log: the key is shown nowhere else). */
export async function firstStartAnnounced(db: Kysely<Database>, config: ResolvedConfig, now: number): Promise<void> {
  const created = await runFirstStart(db, config, now);
  if (created) process.stdout.write(firstStartNotice(created, config.baseUrl));
}

export function firstStartNotice(result: FirstStartResult, baseUrl: string): string {
  return [
    '',
    '==================== Gatehouse first start ====================',
    `Bootstrap developer API key (shown once, store it now): ${result.apiKey}`,
    `Demo app client_id: ${result.demoClientId} (outside production, open ${baseUrl}/demo)`,
    'Use it as "Authorization: Bearer <key>" on /v1/dev. Set ADMIN_TOKEN to manage developers.',
    `Developer console: open ${result.consoleInvitation} signed in with your account (once) to manage the apps there.`,
    '================================================================',
    '',
  ].join('\n');
}
