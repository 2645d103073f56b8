import type { FastifyInstance, FastifyRequest } from 'fastify';
import { parseAmr } from '../../shared/acr.js';
import { AppError, type ErrorReason } from '../../errors.js';
import { type TokenResponse } from '../../tokens/service.js';
import { requestContext } from '../../shared/request-context.js';
import { hashSecret } from '../../shared/ids.js';
import { appendEvent } from '../../storage/repos/events.js';
import {
  type AuthorizationCodeRow,
  burnAuthorizationCode,
  type CodeRedemption,
  findAuthorizationCode,
  type AppWithCodeRedemption,
  findGrant,
  revokeGrant,
} from '../../storage/repos/grants.js';
import { required, type Params } from '../params.js';
import type { ClientAuthenticator } from '../token.js';
import { isValidVerifier, verifyPkce } from '../../sign-in/pkce.js';
import { narrowedAudience, resourceList } from '../../shared/resources.js';

/** Longer than any code this server issues: refused without a lookup. */
const MAX_CODE_LENGTH = 200;

/** Why a code cannot be redeemed by this request, judged from the code row alone (null when it can). */
function codeCheckFailure(row: Pick<AuthorizationCodeRow, 'expires_at' | 'redirect_uri' | 'code_challenge'>, now: number, redirectUri: string, verifier: string | undefined): ErrorReason | null {
  if (row.expires_at <= now) return 'code_expired';
  if (row.redirect_uri !== redirectUri) return 'redirect_uri_mismatch';
  if (row.code_challenge !== null) {
    if (verifier === undefined) return 'code_verifier_missing';
    if (!verifyPkce(verifier, row.code_challenge)) return 'code_verifier_mismatch';
  } else if (verifier !== undefined) {
    // A downgrade: the verifier of another, challenged request replayed against this code.
    return 'code_verifier_unexpected';
  }
  return null;
}

/**
 * grant_type=authorization_code (RFC 6749 §4.1.3, RFC 7636 §4.6, docs/reference/tokens.md): exactly one redemption
 * wins. Once consumed, a failed check (expiry, redirect_uri, verifier) has burned the code. Any later or
 * concurrent redemption fails with `invalid_grant` and revokes what the code produced. A code of another
 * client is refused without being burned. A code whose basis is gone (user disabled or blocked, consent
 * withdrawn, password changed since it was issued) never redeems.
 *
 * The request is judged on the code and basis read with the client; the redemption then consumes the
 * code and stores the grant in one statement (PostgreSQL), which returns the basis as it saw it, and that
 * is judged again: should the basis have changed in between, the grant just stored is revoked before
 * anything is answered. Two round trips on PostgreSQL instead of a transaction's five.
 */
export async function authorizationCodeGrant(app: FastifyInstance, request: FastifyRequest, params: Params, authenticate: ClientAuthenticator, dpopJkt: string | undefined): Promise<TokenResponse> {
  const presented = params.code;
  const codeHash = presented !== undefined && presented !== '' && presented.length <= MAX_CODE_LENGTH ? hashSecret(presented) : undefined;
  // The client and the presented code with its redemption basis, in one statement (on PostgreSQL, shared
  // with the grants in flight). The token service reads the app's database, the one the authenticator offers.
  const client: AppWithCodeRedemption =
    codeHash === undefined ? { ...(await authenticate()), codeRedemption: undefined } : await authenticate((_db, clientId) => app.tokens.findAppWithCodeRedemption(clientId, codeHash));
  required(params, 'code');
  const redirectUri = required(params, 'redirect_uri');
  const verifier = params.code_verifier;
  if (verifier !== undefined && !isValidVerifier(verifier)) {
    throw new AppError('invalid_grant', { message: 'The code_verifier is malformed.', reason: 'code_verifier_malformed' });
  }
  if (codeHash === undefined) throw new AppError('invalid_grant', { detail: 'code too long', reason: 'code_unknown' });
  const found = client.codeRedemption;
  if (!found) throw new AppError('invalid_grant', { reason: 'code_unknown' });
  const row = found.code;
  if (row.app_id !== client.id) throw new AppError('invalid_grant', { reason: 'code_other_client' });
  // RFC 9449 §10: a code bound with `dpop_jkt` redeems only with a proof by that key; it is not burned
  // otherwise, so an attacker holding the code but not the key cannot spoil it for the client.
  if (row.dpop_jkt !== null && row.dpop_jkt !== dpopJkt) throw app.tokens.dpop.keyMismatch('token', 'code bound to another DPoP key');

  // RFC 8707 §2.2: within the resources the code was issued for; not burned, as a request the client can correct.
  const audience = narrowedAudience(params.resource, row.resources, client.resourceUris, app.config.baseUrl);

  const now = app.clock.now();
  /** Why this request cannot redeem the code on `redemption` (null when it can): the code row, then its basis. */
  const problem = (redemption: CodeRedemption): ErrorReason | null => {
    const failure = codeCheckFailure(redemption.code, now, redirectUri, verifier);
    if (failure) return failure;
    if (!redemption.user) return 'user_gone';
    // The basis the code was issued on must still hold (sign-in/policy.ts: codeBasisProblem).
    return app.signIn.codeBasisProblem({ ...redemption, user: redemption.user });
  };

  const refused = problem(found);
  if (refused || !found.user) {
    if (await burnAuthorizationCode(app.db, codeHash, now)) throw new AppError('invalid_grant', { reason: refused ?? 'user_gone' });
  } else {
    // The tokens are signed while the redemption runs (its rows need no signature): the redemption
    // decides whether they are stored, and they are answered only once it has committed.
    const prepared = app.tokens.prepareGrantTokens({ app: client, user: found.user, scope: row.scope, authTime: row.auth_time, amr: parseAmr(row.amr), nonce: row.nonce, device: { userAgent: row.user_agent, ipArea: row.ip_area }, dpopJkt, sid: row.sid, resources: resourceList(row.resources), audience });
    const [redemption, response] = await Promise.all([app.tokens.redeemCode({ codeHash, at: now, grant: prepared.grantRow, refreshToken: prepared.refreshRow }), prepared.response]);
    if (redemption) {
      const changed = problem(redemption);
      if (!changed) return response;
      await revokeGrant(app.db, prepared.grantRow.id, now, 'code_basis_changed');
      throw new AppError('invalid_grant', { reason: changed });
    }
  }

  // Replay (sequential or concurrent): revoke the grant the winning redemption produced.
  const settled = await findAuthorizationCode(app.db, codeHash);
  const ctx = requestContext(request);
  await app.db.transaction().execute(async (trx) => {
    const grant = settled?.grant_id ? await findGrant(trx, settled.grant_id) : undefined;
    if (grant) await revokeGrant(trx, grant.id, now, 'code_replay');
    await appendEvent(trx, now, {
      type: 'code.replay_detected',
      appId: client.id,
      userId: row.user_id,
      ip: ctx.ip,
      userAgent: ctx.userAgent,
      data: { grant_id: grant?.id ?? null, code_hash_prefix: codeHash.slice(0, 8) },
    });
  });
  throw new AppError('invalid_grant', { reason: 'code_replayed' });
}
