import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Amr } from '../shared/acr.js';
import { type FactorChangeRefusal, isFactorDue } from '../sign-in/policy.js';
import type { FirstFactor } from '../sign-in/service.js';
import { type FlowState, isSafeResume, type PendingMfa, pendingMfa } from '../shared/pending-flow.js';
import { requestContext } from '../shared/request-context.js';
import { findAppUser } from '../storage/repos/app-users.js';
import { type App, findApp } from '../storage/repos/apps.js';
import type { UserRow } from '../storage/repos/users.js';
import { renderPage } from '../plugins/views.js';

/**
 * Helpers shared by the hosted sign-in pages (login, register, and the other helpers' magic-link and
 * provider pages): the authorization request in flight, and where a finished step goes next.
 */

export function readFlow(request: FastifyRequest): FlowState {
  return request.server.browserSessions.readData<FlowState>(request) as FlowState;
}

/** The resume path of the authorization request in flight, when there is one (always `/oauth/authorize?…`). */
export function resumeOf(request: FastifyRequest): string | undefined {
  const resume = readFlow(request).resume;
  return isSafeResume(resume) ? resume : undefined;
}

/** The app of the authorization request in flight (its sign-in policy, and the app events name). */
export async function flowApp(request: FastifyRequest): Promise<App | undefined> {
  const resume = resumeOf(request);
  if (!resume) return undefined;
  const clientId = new URLSearchParams(resume.slice(resume.indexOf('?') + 1)).get('client_id');
  return clientId ? findApp(request.server.db, clientId) : undefined;
}

/**
 * The app of the flow in flight as a page may show it (its name, logo and colour, "to continue to
 * {app}", the app named in a mail), on the pages of that flow only: every one of them names its client
 * (`?client_id`, carried from page to page). A request stored in the session by a drive-by
 * `/oauth/authorize` therefore brands no page the visitor opens on their own.
 */
export async function shownFlowApp(request: FastifyRequest): Promise<App | undefined> {
  const client = await flowApp(request);
  return client && ((request.query ?? {}) as Record<string, unknown>).client_id === client.id ? client : undefined;
}

/** An app's home page, for links back to it: the origin of its first web redirect URI. */
export function appHome(app: App): string | undefined {
  for (const uri of app.redirectUris) {
    const url = new URL(uri);
    if (url.protocol === 'https:' || url.protocol === 'http:') return `${url.origin}/`;
  }
  return undefined;
}

/**
 * The way back to the app the user came from: the authorization request in flight (which returns to
 * the app signed in), else, for a signed-in user of the app the page was opened for (`?client_id=`),
 * its home. Nobody else is shown an app's name or a link of its choosing.
 */
export async function appLink(request: FastifyRequest): Promise<{ name: string; href: string } | undefined> {
  const resume = resumeOf(request);
  const inFlight = await shownFlowApp(request);
  if (resume && inFlight && !inFlight.disabled) return { name: inFlight.name, href: resume };
  const clientId = ((request.query ?? {}) as Record<string, unknown>).client_id;
  const userId = request.browserSession?.user_id;
  if (!userId || typeof clientId !== 'string' || clientId.length > 200 || !(await findAppUser(request.server.db, clientId, userId))) return undefined;
  const named = await findApp(request.server.db, clientId);
  const home = named && !named.disabled ? appHome(named) : undefined;
  return named && home ? { name: named.name, href: home } : undefined;
}

/** The fixed pages a sign-in goes on to instead of its flow (the account page, or confirming a new address): never anything a form chooses. */
export type AccountReturn = NonNullable<PendingMfa['returnTo']>;

/** Where a completed sign-in goes: the account page it started on, back into the authorization request (303), or the account page. */
export function afterSignIn(request: FastifyRequest, reply: FastifyReply, returnTo?: AccountReturn): FastifyReply {
  return reply.redirect(returnTo ?? resumeOf(request) ?? '/account', 303);
}

/**
 * Every hosted door ends here once it has checked a first factor (password, mailed link or code,
 * the provider, a passkey): when the sign-in policy wants a second factor (the user enrolled one, or
 * the app in flight requires one), the factor is remembered and `/mfa` asks for it, and the browser
 * session stays as it was; otherwise the session is signed in (new id, `auth_time`, `amr`), the
 * authentication recorded, and the flow goes on (303).
 */
export async function completeBrowserSignIn(
  request: FastifyRequest,
  reply: FastifyReply,
  user: UserRow,
  factor: FirstFactor,
  via: string,
  returnTo?: AccountReturn,
): Promise<FastifyReply> {
  const app = request.server;
  const client = await flowApp(request);
  const { demand } = await app.signIn.secondFactorDemand(app.db, user, factor.amr, client);
  // `verify_email`: the address comes first (the resumed request asks for it), then the factor.
  if (isFactorDue(demand)) {
    await app.browserSessions.ensure(request, reply);
    await app.browserSessions.writeData(request, reply, { ...readFlow(request), mfa: pendingMfa(user.id, factor, { via, since: app.clock.now(), returnTo }) });
    return reply.redirect(`/mfa${carriedQuery(request)}`, 303);
  }
  if (user.deletion_scheduled_at !== null) return holdForDeletion(request, reply, { userId: user.id, amr: [...factor.amr], method: factor.method, via, returnTo });
  await app.browserSessions.signIn(request, reply, user.id, factor.amr);
  await app.signIn.recordLogin(app.db, { userId: user.id, appId: client?.id ?? null, method: factor.method, amr: factor.amr, via }, requestContext(request));
  return afterSignIn(request, reply, returnTo);
}

/**
 * A completed sign-in of an account whose deletion is scheduled (docs/account/deletion.md): the
 * browser is not signed in yet; the sign-in waits in the session's page state (DELETION_HOLD_SECONDS)
 * and `/account/deletion/scheduled` asks "Keep my account" or "Continue signing out"
 * (src/pages/account-deletion.ts).
 */
export interface DeletionHold {
  userId: string;
  amr: Amr[];
  method: string;
  via: string;
  since: number;
  returnTo?: AccountReturn;
}

export const DELETION_HOLD_SECONDS = 600;

export async function holdForDeletion(request: FastifyRequest, reply: FastifyReply, hold: Omit<DeletionHold, 'since'>): Promise<FastifyReply> {
  const app = request.server;
  await app.browserSessions.ensure(request, reply);
  await app.browserSessions.writeData(request, reply, { ...readFlow(request), mfa: undefined, deletionHold: { ...hold, since: app.clock.now() } });
  return reply.redirect(`/account/deletion/scheduled${carriedQuery(request)}`, 303);
}

/** The held sign-in of this browser, while it is fresh. */
export function deletionHoldOf(request: FastifyRequest): DeletionHold | undefined {
  const hold = readFlow(request).deletionHold as DeletionHold | undefined;
  return hold && typeof hold.userId === 'string' && request.server.clock.now() - hold.since <= DELETION_HOLD_SECONDS ? hold : undefined;
}

/** The pieces of the query worth keeping between hosted pages (language, app name). */
export function carriedQuery(request: FastifyRequest): string {
  const query = (request.query ?? {}) as Record<string, unknown>;
  const keep = new URLSearchParams();
  for (const key of ['client_id', 'ui_locales']) {
    const v = query[key];
    if (typeof v === 'string' && v.length <= 200) keep.set(key, v);
  }
  const s = keep.toString();
  return s ? `?${s}` : '';
}

/** A string field of a form body ('' when absent or not a string). */
export function field(body: unknown, name: string): string {
  const v = (body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}

/** Shows a user's new recovery codes, once (never cached), with the way on. */
export function showRecoveryCodes(request: FastifyRequest, reply: FastifyReply, codes: string[], next: string) {
  reply.header('cache-control', 'no-store');
  return renderPage(request, reply, 'mfa-codes', { titleKey: 'mfa.codes.title', codes, next });
}

/** The account page's `mfa_error` for a refused factor change (its message says what to do: account.ts MFA_ERRORS). */
export function accountMfaError(refusal: FactorChangeRefusal, removal: boolean): 'verify_email' | 'remove' | 'change' {
  if (refusal === 'email_unverified') return 'verify_email';
  return removal ? 'remove' : 'change';
}
