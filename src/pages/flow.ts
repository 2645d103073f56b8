import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { type FlowState, isSafeResume } from '../shared/pending-flow.js';
import type { UserRow } from '../storage/repos/users.js';
import { type App, findApp } from '../storage/repos/apps.js';

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

/** The app of the authorization request in flight (for the "to continue to {app}" line and events). */
export async function flowApp(request: FastifyRequest): Promise<App | undefined> {
  const resume = resumeOf(request);
  if (!resume) return undefined;
  const clientId = new URLSearchParams(resume.slice(resume.indexOf('?') + 1)).get('client_id');
  return clientId ? findApp(request.server.db, clientId) : undefined;
}

/** Where a completed sign-in goes: back into the authorization request (303), or the account page. */
export function afterSignIn(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.redirect(resumeOf(request) ?? '/account', 303);
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

/** What `app.accounts` (helper 3's plugin) offers the hosted pages. */
export interface AccountsPort {
  verifyLogin(input: { email: string; password: string }, ctx: { ip?: string | null; userAgent?: string | null; appId?: string }): Promise<UserRow>;
  register(
    input: { email: string; password: string; name?: string; acceptLegal?: boolean },
    ctx: { ip?: string | null; userAgent?: string | null; appId?: string },
  ): Promise<UserRow>;
}

export function accountsOf(app: FastifyInstance): AccountsPort {
  const accounts = (app as unknown as { accounts?: AccountsPort }).accounts;
  if (!accounts) throw new AppError('service_unavailable', { detail: 'accounts plugin not registered' });
  return accounts;
}

export async function hitIp(app: FastifyInstance, request: FastifyRequest): Promise<void> {
  const throttle = (app as unknown as { throttle?: { hitIp(request: FastifyRequest): Promise<void> } }).throttle;
  if (throttle) await throttle.hitIp(request);
}

/** A string field of a form body ('' when absent or not a string). */
export function field(body: unknown, name: string): string {
  const v = (body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}
