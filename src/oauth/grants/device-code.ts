import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError } from '../../errors.js';
import { parseAmr } from '../../shared/acr.js';
import { hashSecret } from '../../shared/ids.js';
import { deviceOf } from '../../shared/ip-area.js';
import { requestContext } from '../../shared/request-context.js';
import { findByDeviceCode, recordPoll, redeemDeviceAuthorization } from '../../storage/repos/device-authorizations.js';
import { insertGrant, insertRefreshToken } from '../../storage/repos/grants.js';
import { findUserById } from '../../storage/repos/users.js';
import type { TokenResponse } from '../../tokens/service.js';
import type { App } from '../../storage/repos/apps.js';
import { required, type Params } from '../params.js';
import type { ClientAuthenticator } from '../token.js';

export const DEVICE_CODE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

/** Longer than any device code this server issues: refused without a look-up. */
const MAX_DEVICE_CODE_LENGTH = 100;

/** The app may use the device grant: its switch is on and it signs users in; else `unauthorized_client`. */
export function assertDeviceGrantAllowed(client: App): void {
  if (!client.oauth.deviceAuthorizationGrant) {
    throw new AppError('unauthorized_client', { message: 'This application may not use the device authorization grant (device_authorization_grant is off).' });
  }
  if (!client.features.auth) throw new AppError('unauthorized_client', { message: 'This application cannot sign users in.' });
}

/**
 * grant_type=urn:ietf:params:oauth:grant-type:device_code (RFC 8628 §3.4–3.5, docs/reference/oauth.md#device-authorization-grant-rfc-8628):
 * a device code of another client is `invalid_grant`, as an unknown one is; a poll sooner than the
 * interval is `slow_down` (and the interval grows by 5 s); then `expired_token`, `access_denied` or
 * `authorization_pending` as the person decided; an approval redeems once, into tokens as an
 * authorization code gives them, DPoP-bound with a proof.
 */
export async function deviceCodeGrant(app: FastifyInstance, request: FastifyRequest, params: Params, authenticate: ClientAuthenticator, dpopJkt: string | undefined): Promise<TokenResponse> {
  const client = await authenticate();
  assertDeviceGrantAllowed(client);
  const presented = required(params, 'device_code');
  const codeHash = presented.length <= MAX_DEVICE_CODE_LENGTH ? hashSecret(presented) : undefined;
  const row = codeHash === undefined ? undefined : await findByDeviceCode(app.db, codeHash);
  if (!row || row.app_id !== client.id) throw new AppError('invalid_grant', { detail: row ? 'device code of another client' : 'device code unknown' });
  const now = app.clock.now();
  if (row.status === 'redeemed') throw new AppError('invalid_grant', { detail: 'device code already redeemed' });
  if (row.expires_at <= now) throw new AppError('expired_token');
  if (!(await recordPoll(app.db, row.device_code_hash, now))) throw new AppError('slow_down');
  if (row.status === 'denied') throw new AppError('access_denied', { message: 'The person denied the request.' });
  if (row.status === 'pending') throw new AppError('authorization_pending');

  const user = row.user_id === null ? undefined : await findUserById(app.db, row.user_id);
  if (!user) throw new AppError('invalid_grant', { detail: 'device authorization: user gone' });
  const problem = await app.signIn.deviceBasisProblem(app.db, user, client.id, { issuedAt: row.decided_at ?? row.created_at, scope: row.scope });
  if (problem) throw new AppError('invalid_grant', { detail: `device authorization basis gone: ${problem}` });
  const prepared = app.tokens.prepareGrantTokens({
    app: client,
    user,
    scope: row.scope,
    authTime: row.auth_time ?? row.decided_at ?? now,
    amr: parseAmr(row.amr),
    device: deviceOf(requestContext(request)),
    dpopJkt,
  });
  const redeemed = await app.db.transaction().execute(async (trx) => {
    if (!(await redeemDeviceAuthorization(trx, row.device_code_hash))) return false;
    await insertGrant(trx, prepared.grantRow);
    await insertRefreshToken(trx, prepared.refreshRow);
    return true;
  });
  if (!redeemed) throw new AppError('invalid_grant', { detail: 'device code already redeemed' });
  request.log.info({ client_id: client.id, user_id: user.id }, 'device code redeemed');
  return prepared.response;
}
