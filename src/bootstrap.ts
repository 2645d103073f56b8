import type { Kysely } from 'kysely';
import type { ResolvedConfig } from './config.js';
import { createDeveloper } from './admin/service.js';
import { createInvitation } from './console/service.js';
import { createApp } from './dev/service.js';
import { AppError } from './errors.js';
import { developerLinks } from './shared/dev-links.js';
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
 * First start (docs/guides/run-and-test.md#run-it): with no ADMIN_TOKEN and no developer yet, creates the bootstrap developer
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
  if (created) process.stdout.write(firstStartNotice(created, config));
}

/** The first-start banner: the one-time key, and where a new developer goes next (only what this instance serves). */
export function firstStartNotice(result: FirstStartResult, config: Pick<ResolvedConfig, 'production' | 'baseUrl' | 'authUrl' | 'smtpUrl'>): string {
  const links = developerLinks(config);
  return [
    '',
    '==================== Gatehouse first start ====================',
    `Bootstrap developer: ${result.developerId} (${BOOTSTRAP_DEVELOPER_EMAIL})`,
    `Bootstrap developer API key (shown once, store it now): ${result.apiKey}`,
    `Console: ${links.console} (first sign-in with your account: ${result.consoleInvitation}, once)`,
    links.demo ? `Demo app client_id: ${result.demoClientId} (open ${links.demo})` : `Demo app client_id: ${result.demoClientId}`,
    ...(links.mailbox ? [`Dev mailbox (mail is not sent while SMTP_URL is unset): ${links.mailbox}`] : []),
    `Discovery: ${links.discovery} · API reference: ${links.docs}`,
    'Use the key as "Authorization: Bearer <key>" on /v1/dev. Set ADMIN_TOKEN to manage developers.',
    '================================================================',
    '',
  ].join('\n');
}
