import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { authenticateClient } from '../sign-in/client-auth.js';
import { hashSecret, newSecret } from '../shared/ids.js';
import { appendQuery } from '../shared/url.js';
import { formatUserCode, newUserCode, userCodeHash } from '../shared/user-code.js';
import { isUniqueViolation } from '../storage/unique-violation.js';
import { insertDeviceAuthorization } from '../storage/repos/device-authorizations.js';
import { checkScope } from './authorize.js';
import { assertDeviceGrantAllowed } from './grants/device-code.js';
import { singleParams } from './params.js';
import { noStore } from './token.js';

/**
 * POST /oauth/device_authorization (RFC 8628 §3.1–3.2, docs/reference/oauth.md#device-authorization-grant-rfc-8628):
 * the client authenticates as at /oauth/token and must have the app's device switch on; it gets a device
 * code (256 bits, stored hashed) to poll with, and a user code (stored hashed) the person types on `/device`.
 */

/** How long the codes live (RFC 8628 §6.1 recommends short-lived user codes). */
export const DEVICE_CODE_SECONDS = 600;
/** The least time between polls (RFC 8628 §3.2 `interval`; 5 s is the RFC's default). */
export const DEVICE_POLL_INTERVAL = 5;
/** Device authorizations one IP may start per minute: each stores a row, and a device needs one at a time. */
export const MAX_DEVICE_AUTHORIZATIONS_PER_MINUTE = 30;
/** A fresh user code that collides with a stored one is drawn again this many times. */
const USER_CODE_DRAWS = 5;

export async function deviceAuthorization(app: FastifyInstance, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  noStore(reply);
  const params = singleParams(request.body);
  await app.throttle.hitKey(`device-authorization:${request.ip}`, MAX_DEVICE_AUTHORIZATIONS_PER_MINUTE, 60);
  const credentials = { authorization: request.headers.authorization, clientId: params.client_id, clientSecret: params.client_secret, ip: request.ip };
  const { app: client } = await authenticateClient(app, credentials);
  request.corsAppId = client.id;
  assertDeviceGrantAllowed(client);
  const scope = checkScope(params);

  const deviceCode = newSecret('dc');
  const now = app.clock.now();
  for (let draw = 1; ; draw++) {
    const userCode = newUserCode();
    try {
      await insertDeviceAuthorization(app.db, {
        deviceCodeHash: hashSecret(deviceCode),
        userCodeHash: userCodeHash(userCode),
        appId: client.id,
        scope,
        now,
        expiresAt: now + DEVICE_CODE_SECONDS,
        interval: DEVICE_POLL_INTERVAL,
      });
    } catch (error) {
      if (isUniqueViolation(error) && draw < USER_CODE_DRAWS) continue;
      throw error;
    }
    request.log.info({ client_id: client.id }, 'device authorization started');
    const verificationUri = `${app.config.authUrl}/device`;
    return reply.send({
      device_code: deviceCode,
      user_code: formatUserCode(userCode),
      verification_uri: verificationUri,
      verification_uri_complete: appendQuery(verificationUri, { user_code: formatUserCode(userCode) }),
      expires_in: DEVICE_CODE_SECONDS,
      interval: DEVICE_POLL_INTERVAL,
    });
  }
}
