import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { AppError } from '../errors.js';
import { parseAmr } from '../shared/acr.js';
import { type FlowState, pendingMfa, STEP_UP } from '../shared/pending-flow.js';
import { requestContext } from '../shared/request-context.js';
import { scopeList, SUPPORTED_SCOPES } from '../shared/scopes.js';
import { formatUserCode, normalizeUserCode, userCodeHash } from '../shared/user-code.js';
import { missingRequiredFields } from '../sign-in/policy.js';
import { type App, findApp } from '../storage/repos/apps.js';
import { type DeviceAuthorizationRow, findByDeviceCode, findPendingByUserCode } from '../storage/repos/device-authorizations.js';
import { findUserById, type UserRow } from '../storage/repos/users.js';
import { localeOf, renderPage } from '../plugins/views.js';
import { field, readFlow } from './flow.js';
import { type FormState, formFailure, formState } from './form-state.js';

/**
 * The device page (RFC 8628 §3.3, docs/guides/device-sign-in.md): `/device` takes the user code (any case,
 * dashes and spaces ignored), rate-limited per IP and per browser session; every refusal says the same
 * thing, so nothing tells whether a code exists. `/device/continue` then runs the hosted sign-in
 * pipeline `/oauth/authorize` runs (sign-in, second factor, profile data — the same pages, resumed here),
 * and asks the person to approve or deny, showing the app, what it asks and the code, with the warning
 * that the code must come from a device of their own (RFC 8628 §5.4: a phished code). Approving also
 * records consent for the scopes shown. What the pages act on lives in the browser session, never the form.
 */

/** Wrong user codes one IP may type per window, and one browser session (RFC 8628 §5.1: brute force). */
export const MAX_USER_CODE_FAILURES_PER_IP = 20;
export const MAX_USER_CODE_FAILURES_PER_SESSION = 5;
export const USER_CODE_FAILURE_WINDOW = 600;

/** The device request this browser is working on, kept in the session's page state. */
interface PendingDevice {
  deviceCodeHash: string;
  appId: string;
  userCode: string;
  /** The user who pressed Approve: the approval goes on through the remaining steps for them only. */
  approvedBy?: string;
}

const SCOPE_ORDER: readonly string[] = SUPPORTED_SCOPES;

const continuePath = (appId: string) => `/device/continue?${new URLSearchParams({ client_id: appId })}`;

function pendingDevice(request: FastifyRequest): PendingDevice | undefined {
  const device = readFlow(request).device as PendingDevice | undefined;
  return device && typeof device.deviceCodeHash === 'string' && typeof device.appId === 'string' ? device : undefined;
}

async function writeFlow(request: FastifyRequest, reply: FastifyReply, update: (state: FlowState) => FlowState): Promise<void> {
  const app = request.server;
  await app.browserSessions.ensure(request, reply);
  await app.browserSessions.writeData(request, reply, update(readFlow(request)));
}

/** Forgets the device request (and the resumption into it) once it is decided or gone. */
async function clearDevice(request: FastifyRequest, reply: FastifyReply): Promise<void> {
  if (!request.browserSession) return;
  const state = readFlow(request);
  await request.server.browserSessions.writeData(request, reply, { ...state, device: undefined, resume: undefined, profile: undefined });
}

export default async function devicePages(app: FastifyInstance) {
  const t = (request: FastifyRequest) => app.messages.translator(localeOf(request));

  async function renderEntry(request: FastifyRequest, reply: FastifyReply, locals: { form?: FormState; code?: string }) {
    const session = await app.browserSessions.ensure(request, reply);
    return renderPage(request, reply, 'device', { titleKey: 'device.title', csrf: session.csrf_token, form: locals.form, code: locals.code ?? '' });
  }

  /** The request of this browser's device flow while it still waits for a decision, with its app. */
  async function liveRequest(request: FastifyRequest): Promise<{ pending: PendingDevice; row: DeviceAuthorizationRow; client: App } | undefined> {
    const pending = pendingDevice(request);
    if (!pending) return undefined;
    const row = await findByDeviceCode(app.db, pending.deviceCodeHash);
    if (!row || row.status !== 'pending' || row.expires_at <= app.clock.now() || row.app_id !== pending.appId) return undefined;
    const client = await findApp(app.db, row.app_id);
    if (!client || client.disabled || !client.oauth.deviceAuthorizationGrant) return undefined;
    return { pending, row, client };
  }

  /** The code entry again, saying the code cannot be used (expired, decided elsewhere, or the app switched off). */
  async function renderGone(request: FastifyRequest, reply: FastifyReply) {
    await clearDevice(request, reply);
    reply.code(400);
    return renderEntry(request, reply, { form: formState({ message: t(request)('device.error.gone'), focus: 'user_code' }) });
  }

  async function renderDone(request: FastifyRequest, reply: FastifyReply, client: App, approved: boolean) {
    await clearDevice(request, reply);
    return renderPage(request, reply, 'device-done', { titleKey: approved ? 'device.done.approved_title' : 'device.done.denied_title', appName: client.name, approved });
  }

  app.get('/device', async (request, reply) => {
    const typed = ((request.query ?? {}) as Record<string, unknown>).user_code;
    const code = typeof typed === 'string' ? normalizeUserCode(typed) : null;
    return renderEntry(request, reply, { code: code ? formatUserCode(code) : '' });
  });

  app.post('/device', async (request, reply) => {
    const typed = field(request.body, 'user_code');
    const session = request.browserSession!;
    const limits: Array<[string, number]> = [
      [`device-user-code:ip:${request.ip}`, MAX_USER_CODE_FAILURES_PER_IP],
      [`device-user-code:session:${session.id_hash}`, MAX_USER_CODE_FAILURES_PER_SESSION],
    ];
    const failure = (error: unknown) => formFailure(request, reply, error, { codes: ['rate_limited', 'invalid_request'], keys: { invalid_request: 'device.error.unknown' }, focus: 'user_code' });
    try {
      for (const [key, limit] of limits) await app.throttle.assertUnderLimit(key, limit, USER_CODE_FAILURE_WINDOW);
      const code = normalizeUserCode(typed);
      const row = code ? await findPendingByUserCode(app.db, userCodeHash(code), app.clock.now()) : undefined;
      const client = row ? await findApp(app.db, row.app_id) : undefined;
      if (!code || !row || !client || client.disabled || !client.oauth.deviceAuthorizationGrant) {
        for (const [key, limit] of limits) await app.throttle.hitKey(key, limit, USER_CODE_FAILURE_WINDOW);
        throw new AppError('invalid_request', { detail: 'user code unknown, used or expired' });
      }
      const device: PendingDevice = { deviceCodeHash: row.device_code_hash, appId: client.id, userCode: formatUserCode(code) };
      const resume = continuePath(client.id);
      await writeFlow(request, reply, (s) => ({ ...s, device, resume, consent: undefined, profile: undefined, mfa: undefined, pushedResume: undefined }));
      return reply.redirect(resume, 303);
    } catch (error) {
      return renderEntry(request, reply, { form: failure(error), code: typed.slice(0, 20) });
    }
  });

  /**
   * The sign-in pipeline of `/oauth/authorize` for the device request: who is signed in, the sign-in
   * policy (blocked or disabled accounts are refused), a second factor, the approval, the app's
   * required profile data, then the decision recorded.
   */
  app.get('/device/continue', async (request, reply) => {
    reply.header('cache-control', 'no-store');
    const live = await liveRequest(request);
    if (!live) return renderGone(request, reply);
    const { pending, row, client } = live;
    const resume = continuePath(client.id);
    const session = request.browserSession;
    const user = session?.user_id ? await findUserById(app.db, session.user_id) : undefined;
    if (!session || !user) {
      await writeFlow(request, reply, (s) => ({ ...s, resume, mfa: undefined }));
      return reply.redirect(`/login?${new URLSearchParams({ client_id: client.id })}`, 302);
    }
    const amr = parseAmr(session.amr);
    const grant = { requestedScope: row.scope, amr };
    let step = await app.signIn.admit(app.db, user, client, grant, 'authorize');

    if (step === 'mfa') {
      await writeFlow(request, reply, (s) => ({ ...s, resume, mfa: pendingMfa(user.id, { method: STEP_UP, amr }, { via: 'device', since: app.clock.now() }) }));
      return reply.redirect(`/mfa?${new URLSearchParams({ client_id: client.id })}`, 302);
    }
    // Approval comes before the profile data the app asks for, as consent does on the authorize path.
    if (pending.approvedBy !== user.id) return renderConfirm(request, reply, { pending, row, client, user });
    if (step === 'consent') {
      await app.db.transaction().execute((trx) => app.signIn.grantConsent(trx, { appId: client.id, userId: user.id, scope: row.scope, via: 'device_page' }, requestContext(request)));
      step = await app.signIn.nextStep(app.db, user, client, grant);
    }
    if (step === 'profile' || step === 'verify_email') {
      const missing = missingRequiredFields(client, user);
      await writeFlow(request, reply, (s) => ({ ...s, resume, profile: { appId: client.id, userId: user.id, fields: missing, resume, viaSessionJwt: false } }));
      return reply.redirect(`/profile?${new URLSearchParams({ client_id: client.id })}`, 302);
    }
    const authTime = session.auth_time ?? session.created_at;
    const decided = await app.db.transaction().execute((trx) =>
      app.signIn.decideDevice(trx, { app: client, user, deviceCodeHash: row.device_code_hash, approval: { authTime, amr } }),
    );
    if (!decided) return renderGone(request, reply);
    request.log.info({ client_id: client.id, user_id: user.id }, 'device authorization approved');
    return renderDone(request, reply, client, true);
  });

  async function renderConfirm(request: FastifyRequest, reply: FastifyReply, input: { pending: PendingDevice; row: DeviceAuthorizationRow; client: App; user: UserRow }) {
    const tr = t(request);
    return renderPage(request, reply, 'device-confirm', {
      titleKey: 'device.confirm.title',
      csrf: request.browserSession!.csrf_token,
      appName: input.client.name,
      email: input.user.email,
      userCode: input.pending.userCode,
      action: continuePath(input.client.id),
      scopes: scopeList(input.row.scope)
        .sort((a, b) => SCOPE_ORDER.indexOf(a) - SCOPE_ORDER.indexOf(b))
        .map((name) => ({ name, label: tr(`oauth.scope.${name}`) })),
    });
  }

  app.post('/device/continue', async (request, reply) => {
    const action = field(request.body, 'action');
    if (action !== 'approve' && action !== 'deny') throw new AppError('invalid_request', { message: 'Choose Approve or Deny.' });
    const live = await liveRequest(request);
    const userId = request.browserSession?.user_id;
    if (!live || !userId) return renderGone(request, reply);
    const { pending, row, client } = live;
    if (action === 'approve') {
      await writeFlow(request, reply, (s) => ({ ...s, device: { ...pending, approvedBy: userId } }));
      return reply.redirect(continuePath(client.id), 303);
    }
    const user = await findUserById(app.db, userId);
    if (!user) return renderGone(request, reply);
    const decided = await app.db.transaction().execute((trx) =>
      app.signIn.decideDevice(trx, { app: client, user, deviceCodeHash: row.device_code_hash }),
    );
    if (!decided) return renderGone(request, reply);
    request.log.info({ client_id: client.id, user_id: user.id }, 'device authorization denied');
    return renderDone(request, reply, client, false);
  });
}
