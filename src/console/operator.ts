import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { CreateDeveloperBody, createDeveloper, listDeveloperViews, listUsers, PlatformUserListQuery as UserListQuery, setUserStatus } from '../admin/index.js';
import { AppError } from '../errors.js';
import { adminTokenFingerprint, checkAdminToken } from '../plugins/admin-token.js';
import type { BrowserSessions } from '../plugins/browser-sessions.js';
import { safeEqual } from '../shared/ids.js';
import { requestContext } from '../shared/request-context.js';
import { check, field, type FormBody, type ShownOnce } from './forms.js';
import { createInvitation } from './service.js';

/**
 * The operator view (`/console/operator`): the admin API's developers and users, for whoever gives
 * ADMIN_TOKEN in a form (same check and per-IP limit as the API); no user sign-in is needed. The console
 * session keeps a keyed fingerprint of the token given and when (OperatorProof), checked against the
 * current ADMIN_TOKEN on every request: rotating or removing the token ends every operator session at
 * once, and one ends on its own after OPERATOR_SESSION_SECONDS.
 */

/** How long an operator session lasts before the token must be given again. */
export const OPERATOR_SESSION_SECONDS = 4 * 3600;

export type Render = (
  request: FastifyRequest,
  reply: FastifyReply,
  name: string,
  locals: Record<string, unknown> & { titleKey: string; titleParams?: Record<string, string> },
) => Promise<FastifyReply>;

/** The proof an operator gave: the fingerprint of the ADMIN_TOKEN of the time, and when. */
interface OperatorProof {
  fingerprint: string;
  since: number;
}

interface OperatorData {
  operator?: OperatorProof;
}

export async function operatorRoutes(app: FastifyInstance, sessions: BrowserSessions, render: Render) {
  const { db, config } = app;
  const now = () => app.clock.now();
  const fingerprint = adminTokenFingerprint(config);

  /** Is this session's proof for the ADMIN_TOKEN set now, and recent enough? (None is valid without a token.) */
  const isOperator = (request: FastifyRequest) => {
    const proof = sessions.readData<OperatorData>(request).operator;
    if (!fingerprint || typeof proof !== 'object' || proof === null || typeof proof.fingerprint !== 'string' || typeof proof.since !== 'number') return false;
    return safeEqual(proof.fingerprint, fingerprint) && now() - proof.since < OPERATOR_SESSION_SECONDS;
  };

  /** Operator pages: the operator flag in locals (the layout's navigation), or back to the token form. */
  async function operatorOnly(request: FastifyRequest, reply: FastifyReply): Promise<boolean> {
    if (isOperator(request)) return true;
    await reply.redirect('/console/operator', 303);
    return false;
  }

  app.get('/console/operator', async (request, reply) => {
    if (isOperator(request)) return reply.redirect('/console/operator/developers', 303);
    await sessions.ensure(request, reply);
    return render(request, reply, 'operator-login', { titleKey: 'console.operator.title' });
  });

  app.post('/console/operator', async (request, reply) => {
    const body = request.body as FormBody;
    const action = field(body, 'action');
    if (action === 'logout') {
      await sessions.writeData(request, reply, {});
      return reply.redirect('/console/operator', 303);
    }
    if (action !== 'login') throw new AppError('invalid_request', { message: 'Unknown action.' });
    try {
      await checkAdminToken(request, field(body, 'admin_token'));
    } catch (error) {
      if (!(error instanceof AppError) || error.code !== 'unauthorized') throw error;
      reply.code(401);
      return render(request, reply, 'operator-login', { titleKey: 'console.operator.title', errors: { admin_token: 'This is not the ADMIN_TOKEN, or none is set.' } });
    }
    // Kept in a row, not the anonymous session's sealed cookie: leaving the view must revoke it on the server.
    await sessions.writeData(request, reply, { operator: { fingerprint: fingerprint!, since: now() } } satisfies OperatorData, { serverSide: true });
    return reply.redirect('/console/operator/developers', 303);
  });

  async function developersPage(request: FastifyRequest, reply: FastifyReply, extra: Record<string, unknown> = {}) {
    return render(request, reply, 'operator-developers', {
      titleKey: 'console.operator.developers',
      operator: true,
      developers: await listDeveloperViews(db),
      values: { email: '', name: '' },
      ...extra,
    });
  }

  app.get('/console/operator/developers', async (request, reply) => {
    if (!(await operatorOnly(request, reply))) return reply;
    const shown = sessions.takeShownOnce<ShownOnce>(request, reply);
    return developersPage(request, reply, { created: shown.developer, invitation: shown.invitation });
  });

  app.post('/console/operator/developers', async (request, reply) => {
    if (!(await operatorOnly(request, reply))) return reply;
    const body = request.body as FormBody;
    const action = field(body, 'action');
    if (action === 'invite') {
      const invitation = await createInvitation(db, config, now(), field(body, 'developer_id'), requestContext(request));
      sessions.showOnce(request, reply, { invitation: { url: invitation.url, expires_at: invitation.expires_at } } satisfies ShownOnce);
      return reply.redirect('/console/operator/developers', 303);
    }
    if (action !== 'create') throw new AppError('invalid_request', { message: 'Unknown action.' });
    const values = { email: field(body, 'email'), name: field(body, 'name') };
    const checked = check(CreateDeveloperBody, { email: values.email, ...(values.name.trim() ? { name: values.name } : {}) }, request);
    if (!checked.ok) {
      reply.code(400);
      return developersPage(request, reply, { values, errors: checked.errors });
    }
    try {
      const created = await createDeveloper(db, now(), checked.value);
      sessions.showOnce(request, reply, { developer: { email: created.email, api_key: created.api_key } } satisfies ShownOnce);
      return reply.redirect('/console/operator/developers', 303);
    } catch (error) {
      if (!(error instanceof AppError) || error.code !== 'conflict') throw error;
      reply.code(409);
      return developersPage(request, reply, { values, errors: { email: error.publicMessage } });
    }
  });

  app.get('/console/operator/users', async (request, reply) => {
    if (!(await operatorOnly(request, reply))) return reply;
    const raw = Object.fromEntries(
      Object.entries((request.query ?? {}) as Record<string, unknown>).filter(
        (entry): entry is [string, string] => entry[0] !== 'action' && entry[0] !== 'ui_locales' && typeof entry[1] === 'string' && entry[1] !== '',
      ),
    );
    const checked = check(UserListQuery, raw, request);
    const locals = { titleKey: 'console.operator.users', operator: true, query: raw };
    if (!checked.ok) {
      reply.code(400);
      return render(request, reply, 'operator-users', { ...locals, errors: checked.errors, list: null });
    }
    return render(request, reply, 'operator-users', { ...locals, list: await listUsers(db, checked.value), back: new URLSearchParams(raw).toString() });
  });

  app.post('/console/operator/users', async (request, reply) => {
    if (!(await operatorOnly(request, reply))) return reply;
    const body = request.body as FormBody;
    const action = field(body, 'action');
    if (action !== 'block' && action !== 'unblock') throw new AppError('invalid_request', { message: 'Unknown action.' });
    await setUserStatus(db, now(), field(body, 'user_id'), action === 'block' ? 'disabled' : 'active');
    return reply.redirect(`/console/operator/users?${new URLSearchParams(field(body, 'back')).toString()}`, 303);
  });
}
