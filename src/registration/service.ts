import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import { type AppView, createApp, removeApp, updateApp, validateRedirectUris } from '../dev/index.js';
import { hashSecret, newId, newSecret, safeEqual } from '../shared/ids.js';
import { isLoopbackHost } from '../shared/loopback.js';
import type { RequestContext } from '../shared/request-context.js';
import { isoTime } from '../shared/time.js';
import { type App, findApp, listAppRedirectUris, saveApp } from '../storage/repos/apps.js';
import {
  type ClientRegistrationRow,
  countLiveInitialAccessTokens,
  findClientRegistration,
  findLiveInitialAccessToken,
  type InitialAccessTokenRow,
  insertClientRegistration,
  insertInitialAccessToken,
  listInitialAccessTokens,
  listQuarantinedRegistrations,
  releaseClientRegistration,
  revokeInitialAccessToken,
  useInitialAccessToken,
} from '../storage/repos/client-registrations.js';
import { ensurePlatformDeveloper, PLATFORM_DEVELOPER_ID } from '../storage/repos/developers.js';
import { appendEvent } from '../storage/repos/events.js';
import type { Database } from '../storage/schema.js';
import { inTransaction } from '../storage/transaction.js';

/**
 * Dynamic client registration (RFC 7591) and its management (RFC 7592), docs/reference/oauth.md#dynamic-client-registration-rfc-7591.
 * A client registered with a developer's initial access token is that developer's app; one registered
 * openly belongs to the platform, is public, and stays disabled until the operator approves it.
 */

export type AuthMethod = 'none' | 'client_secret_basic' | 'client_secret_post';

/** What a registration may say, after the checks: the rest of RFC 7591 §2 is ignored. */
export interface ClientMetadata {
  clientName: string;
  redirectUris: string[];
  authMethod: AuthMethod;
}

const AUTH_METHODS: readonly AuthMethod[] = ['none', 'client_secret_basic', 'client_secret_post'];
const GRANT_TYPES = ['authorization_code', 'refresh_token'];
const MAX_CLIENT_NAME = 100;

/** Days an initial access token lives at most, and how many live ones a developer may hold. */
export const MAX_INITIAL_ACCESS_TOKEN_DAYS = 90;
export const MAX_LIVE_INITIAL_ACCESS_TOKENS = 50;

const badMetadata = (message: string) => new AppError('invalid_client_metadata', { message });

const stringList = (value: unknown, field: string): string[] => {
  if (!Array.isArray(value) || !value.every((v) => typeof v === 'string')) throw badMetadata(`${field} must be an array of strings.`);
  return value;
};

/**
 * Checks registration metadata (RFC 7591 §2, §3.2.2): the redirect URIs by the developer API's rules,
 * authorization_code (+ refresh_token) and `code` only, a known client authentication method, and for an
 * open registration a public client. Unknown fields are ignored. Pure, so it is table-tested.
 */
export function parseClientMetadata(body: unknown, options: { open: boolean }): ClientMetadata {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) throw badMetadata('The body must be a JSON object of client metadata.');
  const input = body as Record<string, unknown>;
  if (input.redirect_uris === undefined) throw new AppError('invalid_redirect_uri', { message: 'redirect_uris is required.' });
  const redirectUris = stringList(input.redirect_uris, 'redirect_uris');
  if (redirectUris.length === 0) throw new AppError('invalid_redirect_uri', { message: 'redirect_uris must name at least one URI.' });
  const checked = validateRedirectUris(redirectUris);
  if (!checked.ok) {
    const problem = checked.problems[0]!;
    throw new AppError('invalid_redirect_uri', { message: `redirect_uris${problem.index === null ? '' : `[${problem.index}]`} ${problem.message}.` });
  }
  const authMethod = input.token_endpoint_auth_method ?? 'client_secret_basic';
  if (typeof authMethod !== 'string' || !AUTH_METHODS.includes(authMethod as AuthMethod)) {
    throw badMetadata(`token_endpoint_auth_method must be one of ${AUTH_METHODS.join(', ')}.`);
  }
  if (options.open && authMethod !== 'none') throw badMetadata('Open registration is for public clients only: token_endpoint_auth_method must be none.');
  const grantTypes = input.grant_types === undefined ? ['authorization_code'] : stringList(input.grant_types, 'grant_types');
  if (!grantTypes.includes('authorization_code') || grantTypes.some((g) => !GRANT_TYPES.includes(g))) {
    throw badMetadata(`grant_types must include authorization_code and may add only refresh_token.`);
  }
  const responseTypes = input.response_types === undefined ? ['code'] : stringList(input.response_types, 'response_types');
  if (responseTypes.some((r) => r !== 'code')) throw badMetadata('response_types may only be code.');
  const name = input.client_name ?? 'Registered client';
  if (typeof name !== 'string' || name.trim() === '' || name.trim().length > MAX_CLIENT_NAME) throw badMetadata(`client_name must be 1 to ${MAX_CLIENT_NAME} characters.`);
  return { clientName: name.trim(), redirectUris, authMethod: authMethod as AuthMethod };
}

/**
 * What a redirect URI stakes a claim to: a web host, a private-use scheme, or (on loopback, which every
 * native app shares) the exact URI. An open registration may not claim what another app has.
 */
export function redirectClaim(uri: string): string {
  const scheme = uri.slice(0, uri.indexOf(':'));
  if (scheme !== 'http' && scheme !== 'https') return `scheme:${scheme}`;
  const host = new URL(uri).hostname;
  return isLoopbackHost(host) ? `uri:${uri}` : `host:${host}`;
}

async function refuseClaimedRedirects(db: Kysely<Database>, uris: readonly string[], exceptAppId?: string): Promise<void> {
  const wanted = new Set(uris.map(redirectClaim));
  for (const app of await listAppRedirectUris(db)) {
    if (app.id === exceptAppId) continue;
    if (app.redirectUris.some((uri) => wanted.has(redirectClaim(uri)))) {
      throw new AppError('invalid_redirect_uri', { message: 'A redirect URI names a host or scheme another app uses.', detail: `claimed by ${app.id}` });
    }
  }
}

/** The RFC 7591 §3.2.1 / RFC 7592 §3 answer. The secrets appear only when they were just made. */
export interface RegistrationResponse {
  client_id: string;
  client_id_issued_at: number;
  client_secret?: string;
  client_secret_expires_at?: number;
  registration_access_token?: string;
  registration_client_uri: string;
  client_name: string;
  redirect_uris: string[];
  grant_types: string[];
  response_types: string[];
  token_endpoint_auth_method: AuthMethod;
  /** Registered openly and not yet approved: the client cannot sign anyone in. */
  quarantined: boolean;
}

function toResponse(baseUrl: string, app: Pick<App, 'id' | 'createdAt' | 'name' | 'redirectUris' | 'type'>, registration: Pick<ClientRegistrationRow, 'quarantined'>, extra: { clientSecret?: string; accessToken?: string; authMethod?: AuthMethod } = {}): RegistrationResponse {
  return {
    client_id: app.id,
    client_id_issued_at: app.createdAt,
    ...(extra.clientSecret ? { client_secret: extra.clientSecret, client_secret_expires_at: 0 } : {}),
    ...(extra.accessToken ? { registration_access_token: extra.accessToken } : {}),
    registration_client_uri: `${baseUrl}/oauth/register/${encodeURIComponent(app.id)}`,
    client_name: app.name,
    redirect_uris: app.redirectUris,
    grant_types: GRANT_TYPES,
    response_types: ['code'],
    token_endpoint_auth_method: extra.authMethod ?? (app.type === 'public' ? 'none' : 'client_secret_basic'),
    quarantined: registration.quarantined === 1,
  };
}

const invalidToken = (detail: string) =>
  new AppError('invalid_token', { status: 401, message: 'The access token is missing, unknown, expired, revoked or used.', detail, headers: { 'www-authenticate': 'Bearer error="invalid_token"' } });

export interface RegistrationDeps {
  db: Kysely<Database>;
  now: number;
  baseUrl: string;
  ctx: RequestContext;
}

/**
 * POST /oauth/register. With an initial access token the client is its developer's, active at once; a
 * single-use token is taken by a conditional UPDATE in the transaction that creates the app. Without
 * one (open registration, when on) the client is the platform's, public, and quarantined.
 */
export async function registerClient(deps: RegistrationDeps, input: { initialAccessToken?: string; open: boolean; body: unknown }): Promise<RegistrationResponse> {
  // Any Authorization header is a claim to a token: a malformed or wrong one is refused, never taken as an open registration.
  const token = input.initialAccessToken ? await findLiveInitialAccessToken(deps.db, hashSecret(input.initialAccessToken), deps.now) : undefined;
  if (input.initialAccessToken !== undefined && !token) throw invalidToken('unknown, expired, revoked or used initial access token');
  if (!token && !input.open) throw invalidToken('registration needs an initial access token');
  const metadata = parseClientMetadata(input.body, { open: !token });
  const accessToken = newSecret('rat');
  return inTransaction(deps.db, async (trx) => {
    if (token && !(await useInitialAccessToken(trx, token.id, deps.now))) throw invalidToken('initial access token used up meanwhile');
    if (!token) {
      await refuseClaimedRedirects(trx, metadata.redirectUris);
      await ensurePlatformDeveloper(trx, hashSecret(newSecret('dk')), deps.now);
    }
    const view: AppView = await createApp(
      trx,
      deps.now,
      token ? token.developer_id : PLATFORM_DEVELOPER_ID,
      {
        name: metadata.clientName,
        type: metadata.authMethod === 'none' ? 'public' : 'confidential',
        redirect_uris: metadata.redirectUris,
        features: { auth: true, profile: false },
        required_fields: [],
        allowed_origins: [],
        mfa: 'optional',
        disabled: !token,
      },
      deps.ctx,
    );
    const registration: ClientRegistrationRow = {
      app_id: view.id,
      access_token_hash: hashSecret(accessToken),
      method: token ? 'initial_access_token' : 'open',
      initial_access_token_id: token?.id ?? null,
      quarantined: token ? 0 : 1,
      created_at: deps.now,
    };
    await insertClientRegistration(trx, registration);
    const app = { id: view.id, createdAt: deps.now, name: view.name, redirectUris: view.redirect_uris, type: view.type };
    return toResponse(deps.baseUrl, app, registration, { clientSecret: view.client_secret, accessToken, authMethod: metadata.authMethod });
  });
}

/** The app and registration a registration access token manages (RFC 7592 §2); any mismatch is 401 invalid_token. */
async function managedClient(db: Kysely<Database>, clientId: string, accessToken: string | undefined): Promise<{ app: App; registration: ClientRegistrationRow }> {
  if (!accessToken) throw invalidToken('no registration access token');
  const presented = hashSecret(accessToken);
  const registration = clientId.length <= 200 ? await findClientRegistration(db, clientId) : undefined;
  if (!registration || !safeEqual(presented, registration.access_token_hash)) throw invalidToken('registration access token does not manage this client');
  const app = await findApp(db, clientId);
  if (!app) throw invalidToken('client gone');
  return { app, registration };
}

export async function readRegistration(deps: RegistrationDeps, clientId: string, accessToken: string | undefined): Promise<RegistrationResponse> {
  const { app, registration } = await managedClient(deps.db, clientId, accessToken);
  return toResponse(deps.baseUrl, app, registration);
}

/**
 * PUT (RFC 7592 §2.2): the metadata replaces the name and redirect URIs; the client's type and its
 * quarantine stay as they are.
 */
export async function replaceRegistration(deps: RegistrationDeps, clientId: string, accessToken: string | undefined, body: unknown): Promise<RegistrationResponse> {
  const { app, registration } = await managedClient(deps.db, clientId, accessToken);
  if (typeof body === 'object' && body !== null && (body as Record<string, unknown>).client_id !== clientId) throw badMetadata('client_id must be the client being updated.');
  const metadata = parseClientMetadata(body, { open: registration.method === 'open' });
  if ((metadata.authMethod === 'none') !== (app.type === 'public')) throw badMetadata('token_endpoint_auth_method cannot change between none and a client secret.');
  if (registration.method === 'open') await refuseClaimedRedirects(deps.db, metadata.redirectUris, app.id);
  const view = await updateApp(deps.db, deps.now, app, { name: metadata.clientName, redirect_uris: metadata.redirectUris }, deps.ctx);
  return toResponse(deps.baseUrl, { ...app, name: view.name, redirectUris: view.redirect_uris }, registration, { authMethod: metadata.authMethod });
}

/** DELETE (RFC 7592 §2.3): the app goes, with everything it was granted. */
export async function deleteRegistration(deps: RegistrationDeps, clientId: string, accessToken: string | undefined): Promise<void> {
  const { app } = await managedClient(deps.db, clientId, accessToken);
  await removeApp(deps.db, deps.now, app, deps.ctx);
}

/** An initial access token as the developer API shows it; `token` only in the answer that made it. */
export interface InitialAccessTokenView {
  id: string;
  name: string;
  single_use: boolean;
  created_at: string;
  expires_at: string;
  used_at: string | null;
  revoked_at: string | null;
  token?: string;
}

const toTokenView = (row: InitialAccessTokenRow, token?: string): InitialAccessTokenView => ({
  id: row.id,
  name: row.name,
  single_use: row.single_use === 1,
  created_at: isoTime(row.created_at),
  expires_at: isoTime(row.expires_at),
  used_at: row.used_at === null ? null : isoTime(row.used_at),
  revoked_at: row.revoked_at === null ? null : isoTime(row.revoked_at),
  ...(token ? { token } : {}),
});

export async function issueInitialAccessToken(db: Kysely<Database>, now: number, developerId: string, input: { name: string; expires_in_days: number; single_use: boolean }): Promise<InitialAccessTokenView> {
  const token = newSecret('iat');
  const row: InitialAccessTokenRow = {
    id: newId('iat'),
    developer_id: developerId,
    name: input.name,
    token_hash: hashSecret(token),
    single_use: input.single_use ? 1 : 0,
    created_at: now,
    expires_at: now + input.expires_in_days * 86_400,
    used_at: null,
    revoked_at: null,
  };
  await inTransaction(db, async (trx) => {
    if ((await countLiveInitialAccessTokens(trx, developerId, now)) >= MAX_LIVE_INITIAL_ACCESS_TOKENS) {
      throw new AppError('invalid_request', { message: `At most ${MAX_LIVE_INITIAL_ACCESS_TOKENS} initial access tokens can be live at once. Revoke one first.` });
    }
    await insertInitialAccessToken(trx, row);
  });
  return toTokenView(row, token);
}

export async function listInitialAccessTokenViews(db: Kysely<Database>, developerId: string): Promise<InitialAccessTokenView[]> {
  return (await listInitialAccessTokens(db, developerId)).map((row) => toTokenView(row));
}

export async function revokeInitialAccessTokenOf(db: Kysely<Database>, now: number, developerId: string, id: string): Promise<void> {
  if (!(await revokeInitialAccessToken(db, developerId, id, now))) throw new AppError('not_found', { detail: `initial access token ${id} is not the developer's or already revoked` });
}

/** A quarantined registration as the admin API lists it. */
export interface QuarantinedClientView {
  client_id: string;
  client_name: string;
  redirect_uris: string[];
  registered_at: string;
}

export async function listQuarantinedClients(db: Kysely<Database>): Promise<QuarantinedClientView[]> {
  const out: QuarantinedClientView[] = [];
  for (const registration of await listQuarantinedRegistrations(db)) {
    const app = await findApp(db, registration.app_id);
    if (app) out.push({ client_id: app.id, client_name: app.name, redirect_uris: app.redirectUris, registered_at: isoTime(registration.created_at) });
  }
  return out;
}

/** The operator approves an openly registered client: the quarantine lifts and the app is enabled. */
export async function approveClient(db: Kysely<Database>, now: number, clientId: string, ctx: RequestContext): Promise<void> {
  await inTransaction(db, async (trx) => {
    const app = clientId.length <= 200 ? await findApp(trx, clientId) : undefined;
    if (!app || !(await releaseClientRegistration(trx, clientId))) throw new AppError('not_found', { detail: `no quarantined client ${clientId}` });
    await saveApp(trx, { ...app, disabled: false, updatedAt: now });
    await appendEvent(trx, now, { type: 'app.updated', appId: app.id, ip: ctx.ip, userAgent: ctx.userAgent, data: { developer_id: app.developerId, fields: ['quarantine'] } });
  });
}

/** The operator refuses an openly registered client that is still quarantined: it is deleted. */
export async function rejectClient(db: Kysely<Database>, now: number, clientId: string, ctx: RequestContext): Promise<void> {
  const registration = clientId.length <= 200 ? await findClientRegistration(db, clientId) : undefined;
  const app = registration?.quarantined === 1 ? await findApp(db, clientId) : undefined;
  if (!app) throw new AppError('not_found', { detail: `no quarantined client ${clientId}` });
  await removeApp(db, now, app, ctx);
}
