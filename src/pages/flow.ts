import type { FastifyReply, FastifyRequest } from 'fastify';
import { isAppError } from '../errors.js';
import { type FlowState, isSafeResume } from '../shared/pending-flow.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { localeOf } from '../plugins/views.js';

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

/**
 * The message a hosted form shows for profile data the sign-in service refused (one `details` entry
 * per field, see SignIn.applyProfileData); rethrows anything else.
 */
export function profileDataError(request: FastifyRequest, error: unknown): string {
  if (!isAppError(error) || error.code !== 'invalid_request' || !error.details?.length) throw error;
  const t = request.server.messages.translator(localeOf(request));
  return t(`idp.error.invalid_${error.details[0]!.path}`);
}

/** A string field of a form body ('' when absent or not a string). */
export function field(body: unknown, name: string): string {
  const v = (body as Record<string, unknown> | undefined)?.[name];
  return typeof v === 'string' ? v : '';
}
