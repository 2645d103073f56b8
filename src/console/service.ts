import type { Kysely } from 'kysely';
import type { ResolvedConfig } from '../config.js';
import { AppError } from '../errors.js';
import { createDeveloper } from '../admin/index.js';
import { hashSecret, newId, newSecret } from '../shared/ids.js';
import type { RequestContext } from '../shared/request-context.js';
import { isoTime } from '../shared/time.js';
import { type App, defaultAppSettings, findApp, insertApp, saveApp } from '../storage/repos/apps.js';
import {
  type Developer,
  type DeveloperApiKeyRow,
  ensurePlatformDeveloper,
  findDeveloper,
  findDeveloperByUser,
  findUnlinkedDeveloperByEmail,
  insertDeveloperApiKey,
  linkDeveloperToUser,
  listDeveloperApiKeys,
  PLATFORM_DEVELOPER_ID,
  revokeDeveloperApiKey,
} from '../storage/repos/developers.js';
import { appendEvent } from '../storage/repos/events.js';
import { insertOneTimeToken, takeOneTimeTokenByHash } from '../storage/repos/one-time-tokens.js';
import { findUserById } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import { inTransaction } from '../storage/transaction.js';

/**
 * The console is a public app of the platform itself (code + PKCE through the hosted login), owned by
 * the hidden platform developer so no developer ever lists it.
 */
export const CONSOLE_APP_ID = 'app_gatehouse_console';
export const CONSOLE_SCOPE = 'openid email';
export const INVITATION_KIND = 'developer_invitation';
export const INVITATION_TTL_SECONDS = 7 * 86_400;

export const consoleRedirectUri = (config: ResolvedConfig): string => `${config.authUrl}/console/callback`;

/**
 * Creates the console app at start, or points its redirect URI at the current AUTH_URL. Concurrent
 * starts: the loser's insert fails on the primary key and finds the winner's row.
 */
export async function ensureConsoleApp(db: Kysely<Database>, config: ResolvedConfig, now: number): Promise<void> {
  const redirectUris = [consoleRedirectUri(config)];
  const existing = await findApp(db, CONSOLE_APP_ID);
  if (existing) {
    if (existing.redirectUris.join(' ') !== redirectUris.join(' ')) await saveApp(db, { ...existing, redirectUris, updatedAt: now });
    return;
  }
  // The platform developer's key is a random secret no one is given: it cannot call /v1/dev.
  await ensurePlatformDeveloper(db, hashSecret(newSecret('dk')), now);
  const app: App = {
    id: CONSOLE_APP_ID,
    developerId: PLATFORM_DEVELOPER_ID,
    name: 'Gatehouse console',
    type: 'public',
    clientSecretHash: null,
    redirectUris,
    allowedOrigins: [],
    features: { auth: true, profile: false },
    requiredFields: [],
    mfa: 'optional',
    branding: { logoUrl: null, logoUrlDark: null, accentColor: null },
    defaultLocale: null,
    backchannelLogout: { uri: null, sessionRequired: false },
    ...defaultAppSettings(),
    disabled: false,
    createdAt: now,
    updatedAt: now,
    oauth: { dpopBoundAccessTokens: false, requirePushedAuthorizationRequests: false, deviceAuthorizationGrant: false },
    resourceUris: [],
    clientCredentials: { enabled: false, scopes: [], notBefore: null },
  };
  try {
    await insertApp(db, app);
  } catch (error) {
    if (!(await findApp(db, CONSOLE_APP_ID))) throw error;
  }
}

/**
 * The developer a signed-in user acts as: the one linked to the account, else the unlinked developer
 * whose email is the user's verified email (linked now, once).
 */
export async function developerOfUser(db: Kysely<Database>, now: number, userId: string, ctx: RequestContext): Promise<Developer | undefined> {
  const linked = await findDeveloperByUser(db, userId);
  if (linked) return linked;
  const user = await findUserById(db, userId);
  if (!user || user.email_verified !== 1 || user.status !== 'active') return undefined;
  const developer = await findUnlinkedDeveloperByEmail(db, user.email);
  if (!developer) return undefined;
  await inTransaction(db, async (trx) => {
    await linkDeveloperToUser(trx, developer.id, userId);
    await appendEvent(trx, now, { type: 'developer.linked', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: developer.id, method: 'email' } });
  });
  return developer;
}

/**
 * A development server's front door: the signed-in user becomes a developer of their own email, at
 * once. Only a loopback development server offers it (the route checks); a developer who already has
 * that email is someone else's to invite, never taken over (409).
 */
export async function becomeDeveloper(db: Kysely<Database>, now: number, user: { id: string; email: string; name: string | null }, ctx: RequestContext): Promise<void> {
  if (await findDeveloperByUser(db, user.id)) return;
  await inTransaction(db, async (trx) => {
    const developer = await createDeveloper(trx, now, { email: user.email, ...(user.name ? { name: user.name } : {}) });
    await linkDeveloperToUser(trx, developer.id, user.id);
    await appendEvent(trx, now, { type: 'developer.linked', userId: user.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: developer.id, method: 'development' } });
  });
}

/** A one-time console link that makes whichever user opens it (signed in) this developer's account. */
export async function createInvitation(db: Kysely<Database>, config: ResolvedConfig, now: number, developerId: string, ctx: RequestContext) {
  if (!(await findDeveloper(db, developerId))) throw new AppError('not_found', { detail: `developer ${developerId}` });
  const token = newSecret('inv');
  const expiresAt = now + INVITATION_TTL_SECONDS;
  await inTransaction(db, async (trx) => {
    await insertOneTimeToken(trx, {
      id: newId('ott'),
      kind: INVITATION_KIND,
      token_hash: hashSecret(token),
      code_hash: null,
      user_id: null,
      email: null,
      app_id: null,
      data: JSON.stringify({ developer_id: developerId }),
      attempts: 0,
      created_at: now,
      expires_at: expiresAt,
    });
    await appendEvent(trx, now, { type: 'developer.invited', ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: developerId } });
  });
  return { url: `${config.authUrl}/console/invitation?token=${encodeURIComponent(token)}`, expires_at: isoTime(expiresAt) };
}

/** Uses an invitation (once): the user becomes the developer's account. 400 `invalid_token` when unknown, used or expired. */
export async function acceptInvitation(db: Kysely<Database>, now: number, token: string, userId: string, ctx: RequestContext): Promise<string> {
  return inTransaction(db, async (trx) => {
    const row = await takeOneTimeTokenByHash(trx, INVITATION_KIND, hashSecret(token), now);
    if (!row) throw new AppError('invalid_token', { message: 'This invitation link is unknown, used or expired. Ask for a new one.' });
    const { developer_id: developerId } = JSON.parse(row.data) as { developer_id: string };
    await linkDeveloperToUser(trx, developerId, userId);
    await appendEvent(trx, now, { type: 'developer.linked', userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: developerId, method: 'invitation' } });
    return developerId;
  });
}

export interface ApiKeyView {
  id: string;
  name: string;
  created_at: number;
  revoked_at: number | null;
}

const toKeyView = (row: DeveloperApiKeyRow): ApiKeyView => ({ id: row.id, name: row.name, created_at: row.created_at, revoked_at: row.revoked_at });

export async function listApiKeys(db: Kysely<Database>, developerId: string): Promise<ApiKeyView[]> {
  return (await listDeveloperApiKeys(db, developerId)).map(toKeyView);
}

/** A new API key for `/v1/dev`; the key itself is returned once (only its hash is stored). */
export async function createApiKey(db: Kysely<Database>, now: number, developerId: string, name: string, ctx: RequestContext): Promise<ApiKeyView & { key: string }> {
  const key = newSecret('dk');
  const row: DeveloperApiKeyRow = { id: newId('key'), developer_id: developerId, name, key_hash: hashSecret(key), created_at: now, revoked_at: null };
  await inTransaction(db, async (trx) => {
    await insertDeveloperApiKey(trx, row);
    await appendEvent(trx, now, { type: 'developer.api_key_created', ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: developerId, key_id: row.id } });
  });
  return { ...toKeyView(row), key };
}

/** Revokes one of the developer's live keys (it stops working at once); 404 when there is no such key. */
export async function revokeApiKey(db: Kysely<Database>, now: number, developerId: string, keyId: string, ctx: RequestContext): Promise<void> {
  await inTransaction(db, async (trx) => {
    if (!(await revokeDeveloperApiKey(trx, developerId, keyId, now))) throw new AppError('not_found', { detail: `api key ${keyId}` });
    await appendEvent(trx, now, { type: 'developer.api_key_revoked', ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: developerId, key_id: keyId } });
  });
}
