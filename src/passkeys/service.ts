import type {
  AuthenticationResponseJSON,
  PublicKeyCredentialCreationOptionsJSON,
  PublicKeyCredentialRequestOptionsJSON,
  RegistrationResponseJSON,
  VerifiedAuthenticationResponse,
  VerifiedRegistrationResponse,
} from '@simplewebauthn/server';
import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import type { Amr } from '../shared/acr.js';
import { hashSecret, newId } from '../shared/ids.js';
import type { RequestContext } from '../shared/request-context.js';
import { isoTime, type Clock } from '../shared/time.js';
import { appendEvent } from '../storage/repos/events.js';
import { insertOneTimeToken, takeOneTimeTokenByHash } from '../storage/repos/one-time-tokens.js';
import {
  deletePasskey,
  findPasskeyByCredentialId,
  insertPasskey,
  listPasskeysOfUser,
  type Passkey,
  recordPasskeyUse,
  renamePasskey,
} from '../storage/repos/passkeys.js';
import type { UserRow } from '../storage/repos/users.js';
import type { Database } from '../storage/schema.js';
import { passkeyName } from './names.js';
import type { RelyingParty } from './relying-party.js';

/**
 * Passkeys (WebAuthn): registration, sign-in verification and management, for every door (hosted
 * pages, `/v1/auth/passkey/*`, and the MFA step, which uses a passkey as a second factor).
 *
 * Two kinds (docs/security/credentials.md): an account-wide passkey, added on the hosted account page,
 * signs in everywhere and is a second factor; a passkey an app registered with its access token is
 * scoped to that app — it signs in only there and is no factor of the account, so no app can add a
 * credential that opens the person's account at other apps or the console.
 *
 * Challenges are single-use rows of `one_time_tokens` (stored as the SHA-256 of the challenge, like
 * every other secret), short-lived, and bound to whoever asked for them (`binding`: the browser
 * session, the app, or the user): the answer names its challenge in `clientDataJSON`, which is taken
 * exactly once before anything else is checked. User verification is always required, so a passkey
 * sign-in is strong on its own.
 */

/**
 * RFC 8176 `amr` of a passkey sign-in: `swk`. Registration asks for no attestation, so nothing proves
 * that a key lives in hardware (`hwk`): the authenticator's own flags say so, and any software can set them.
 */
export type PasskeyAmr = Extract<Amr, 'swk'>;
const PASSKEY_AMR: PasskeyAmr = 'swk';

/** What the account page and events show of a passkey (never its key). */
export interface PasskeyView {
  id: string;
  name: string;
  deviceType: Passkey['deviceType'];
  backedUp: boolean;
  /** The app it signs in at only (registered with that app's token), or null: account-wide. */
  appId: string | null;
  createdAt: string;
  lastUsedAt: string | null;
}

/** What passkeys need of the second factors (the `Mfa` service provides it): a passkey is a factor, backed up by recovery codes. */
export interface PasskeyFactors {
  /** In the transaction that enrolled a factor: the user's first recovery codes, or null when they have some. */
  firstRecoveryCodes(trx: Kysely<Database>, userId: string, ctx: RequestContext): Promise<string[] | null>;
  /** After a factor was removed: recovery codes that back up nothing are deleted. */
  dropOrphanRecoveryCodes(trx: Kysely<Database>, userId: string): Promise<void>;
}

export interface PasskeysDeps {
  db: Kysely<Database>;
  clock: Clock;
  rp: RelyingParty;
  factors: PasskeyFactors;
}

/**
 * @simplewebauthn/server (with its ASN.1, CBOR and COSE code) is loaded on the first passkey ceremony,
 * not at start-up: loaded, it holds ~4 MB of V8 heap in every server process, most of which never see
 * a passkey (docs/adr/0010-process-memory.md).
 */
async function loadWebauthn() {
  const [server, { decodeClientDataJSON }] = await Promise.all([import('@simplewebauthn/server'), import('@simplewebauthn/server/helpers')]);
  return { ...server, decodeClientDataJSON };
}
let webauthnLibrary: ReturnType<typeof loadWebauthn> | undefined;
const webauthn = () => (webauthnLibrary ??= loadWebauthn());

/** How long a challenge can be answered (the browser's own timeout is shorter). */
export const CHALLENGE_TTL_SECONDS = 300;
const CEREMONY_TIMEOUT_MS = 120_000;

const KIND = { registration: 'passkey_registration', authentication: 'passkey_authentication' } as const;

/** Who asked for a challenge, and so who may answer it: `session:<hash>`, `app:<client_id>`, `user:<id>`. */
type Binding = string;

/** Who may answer: a binding, or a user (then the binding is the user). */
type Answerer = { userId: string; binding?: Binding } | { userId?: undefined; binding: Binding };

// The type guarantees a user when there is no binding.
const bindingOf = (answerer: Answerer): Binding => answerer.binding ?? `user:${answerer.userId!}`;

const userHandleOf = (userId: string): Uint8Array<ArrayBuffer> => new Uint8Array(Buffer.from(userId, 'utf8'));

const verificationFailed = (detail: string, cause?: unknown) =>
  new AppError('invalid_credentials', { message: 'The passkey could not be verified.', detail, cause });

const challengeUnusable = () =>
  new AppError('invalid_token', { message: 'The passkey request is unknown, used or expired. Start again.', detail: 'passkey challenge not live' });

export class Passkeys {
  constructor(private readonly deps: PasskeysDeps) {}

  /** Passkeys work only where the browser accepts AUTH_URL's host as an RP ID (relying-party.ts). */
  get enabled(): boolean {
    return this.deps.rp.enabled;
  }

  /** Throws 403 `feature_disabled`, saying why, while passkeys are off. */
  assertEnabled(): void {
    this.relyingParty();
  }

  private relyingParty(): Extract<RelyingParty, { enabled: true }> {
    const rp = this.deps.rp;
    if (!rp.enabled) throw new AppError('feature_disabled', { message: `Passkeys are off on this server: ${rp.reason}.`, detail: 'passkeys disabled' });
    return rp;
  }

  // Registration -------------------------------------------------------------------------------------

  /**
   * Options for `navigator.credentials.create`: a discoverable credential with user verification. Every
   * passkey of the user is excluded (an authenticator keeps one credential per account and RP ID).
   */
  async registrationOptions(input: { user: UserRow; binding: Binding; appId: string | null }): Promise<PublicKeyCredentialCreationOptionsJSON> {
    const rp = this.relyingParty();
    const existing = await listPasskeysOfUser(this.deps.db, input.user.id);
    const { generateRegistrationOptions } = await webauthn();
    const options = await generateRegistrationOptions({
      rpName: rp.name,
      rpID: rp.id,
      userName: input.user.email,
      userID: userHandleOf(input.user.id),
      userDisplayName: input.user.name ?? input.user.email,
      attestationType: 'none',
      excludeCredentials: existing.map((p) => ({ id: p.credentialId, transports: p.transports })),
      authenticatorSelection: { residentKey: 'required', userVerification: 'required' },
      timeout: CEREMONY_TIMEOUT_MS,
    });
    await this.storeChallenge('registration', options.challenge, { userId: input.user.id, appId: input.appId, binding: input.binding });
    return options;
  }

  /**
   * Checks the answer to a registration challenge of this user and binding, and stores the passkey
   * (`passkey.registered`). Account-wide (`appId` null): the ceremony ran on AUTH_URL's origin, and the
   * user's first factor comes with the first recovery codes, returned once. Scoped to an app: the
   * ceremony ran on AUTH_URL's origin or one of the app's (`appOrigins`), and no recovery codes come
   * (the passkey is no factor).
   */
  async verifyRegistration(
    input: { userId: string; binding: Binding; response: RegistrationResponseJSON; name?: string; appOrigins?: readonly string[]; appId: string | null; via: string },
    ctx: RequestContext,
  ): Promise<{ passkey: PasskeyView; recoveryCodes: string[] | null }> {
    const rp = this.relyingParty();
    const name = input.name === undefined || input.name.trim() === '' ? undefined : passkeyName(input.name);
    if (name === null) throw new AppError('invalid_request', { details: [{ path: 'name', message: 'must be 1–64 characters without control characters' }] });
    const { challenge } = await this.takeChallenge('registration', input.response, { userId: input.userId, binding: input.binding });
    const { verifyRegistrationResponse } = await webauthn();
    let verified: VerifiedRegistrationResponse;
    try {
      verified = await verifyRegistrationResponse({
        response: input.response,
        expectedChallenge: challenge,
        expectedOrigin: [rp.origin, ...(input.appOrigins ?? [])],
        expectedRPID: rp.id,
        requireUserVerification: true,
      });
    } catch (error) {
      throw new AppError('invalid_request', { message: 'The passkey could not be registered: the answer from the authenticator did not verify.', detail: 'registration not verified', cause: error });
    }
    if (!verified.verified) throw new AppError('invalid_request', { message: 'The passkey could not be registered: the answer from the authenticator did not verify.' });
    const info = verified.registrationInfo;
    const now = this.deps.clock.now();
    const passkey = {
      id: newId('pk'),
      credentialId: info.credential.id,
      userId: input.userId,
      publicKey: Buffer.from(info.credential.publicKey).toString('base64url'),
      counter: info.credential.counter,
      transports: info.credential.transports ?? [],
      deviceType: info.credentialDeviceType,
      backedUp: info.credentialBackedUp,
      name: name ?? `Passkey ${isoTime(now).slice(0, 10)}`,
      appId: input.appId,
      createdAt: now,
    };
    const recoveryCodes = await this.deps.db.transaction().execute(async (trx) => {
      if (await findPasskeyByCredentialId(trx, passkey.credentialId)) throw new AppError('conflict', { message: 'This passkey is already registered.' });
      await insertPasskey(trx, passkey);
      await appendEvent(trx, now, {
        type: 'passkey.registered',
        appId: input.appId,
        userId: input.userId,
        ip: ctx.ip,
        userAgent: ctx.userAgent,
        data: { passkey_id: passkey.id, device_type: passkey.deviceType, backed_up: passkey.backedUp, via: input.via, scope: input.appId === null ? 'account' : 'app' },
      });
      return input.appId === null ? this.deps.factors.firstRecoveryCodes(trx, input.userId, ctx) : null;
    });
    return { passkey: toView({ ...passkey, lastUsedAt: null }), recoveryCodes };
  }

  // Authentication -----------------------------------------------------------------------------------

  /**
   * Options for `navigator.credentials.get`. Without a user: discoverable credentials (empty
   * `allowCredentials`, the authenticator offers the passkeys it holds). With one (a second factor):
   * that user's account-wide passkeys; the challenge is then bound to the user unless a binding is given.
   */
  async authenticationOptions(input: Answerer): Promise<PublicKeyCredentialRequestOptionsJSON> {
    const rp = this.relyingParty();
    const allowed = input.userId === undefined ? [] : await listPasskeysOfUser(this.deps.db, input.userId, 'account-wide');
    const { generateAuthenticationOptions } = await webauthn();
    const options = await generateAuthenticationOptions({
      rpID: rp.id,
      allowCredentials: allowed.map((p) => ({ id: p.credentialId, transports: p.transports })),
      userVerification: 'required',
      timeout: CEREMONY_TIMEOUT_MS,
    });
    await this.storeChallenge('authentication', options.challenge, { userId: input.userId ?? null, appId: null, binding: bindingOf(input) });
    return options;
  }

  /**
   * Checks a sign-in answer: its challenge (taken once; issued to this binding, and equal to
   * `challenge` when the caller kept it), the credential (of `userId` when given; usable where the
   * answer is checked: `appId`, the app signing in, or null for Gatehouse's own pages — see usableAt),
   * the signature with user verification, the origin and RP ID, and the signature counter, which must
   * advance (unless the authenticator keeps none); then records the use. The ceremony ran on AUTH_URL's
   * origin, or on one of `appOrigins`. Throws AppError on any failure.
   */
  async verifyAuthentication(
    input: Answerer & { response: AuthenticationResponseJSON; appId: string | null; secondFactor?: boolean; challenge?: string; appOrigins?: readonly string[] },
  ): Promise<{ userId: string; amr: [PasskeyAmr]; passkeyId: string }> {
    const rp = this.relyingParty();
    const { challenge, userId } = await this.takeChallenge('authentication', input.response, { userId: input.userId ?? null, binding: bindingOf(input), expected: input.challenge });
    const passkey = await findPasskeyByCredentialId(this.deps.db, input.response.id);
    if (!passkey) throw verificationFailed('unknown credential');
    if (userId !== null && passkey.userId !== userId) throw verificationFailed('credential of another user');
    if (!usableAt(passkey, input.appId, input.secondFactor === true)) {
      throw new AppError('invalid_credentials', {
        message: 'This passkey was added by another app and signs in only there. Use another way to sign in.',
        messageKey: 'passkey.error.other_app',
        detail: `passkey scoped to app ${passkey.appId}`,
      });
    }
    const userHandle = input.response.response.userHandle;
    if (userHandle !== undefined && userHandle !== Buffer.from(passkey.userId, 'utf8').toString('base64url')) throw verificationFailed('user handle does not match the credential');
    const { verifyAuthenticationResponse } = await webauthn();
    let verified: VerifiedAuthenticationResponse;
    try {
      verified = await verifyAuthenticationResponse({
        response: input.response,
        expectedChallenge: challenge,
        expectedOrigin: [rp.origin, ...(input.appOrigins ?? [])],
        expectedRPID: rp.id,
        credential: { id: passkey.credentialId, publicKey: new Uint8Array(Buffer.from(passkey.publicKey, 'base64url')), counter: passkey.counter, transports: passkey.transports },
        requireUserVerification: true,
      });
    } catch (error) {
      // Includes a signature counter that did not advance: a cloned authenticator or a replayed answer.
      throw verificationFailed('assertion not verified', error);
    }
    if (!verified.verified) throw verificationFailed('assertion not verified');
    const info = verified.authenticationInfo;
    const recorded = await recordPasskeyUse(this.deps.db, {
      id: passkey.id,
      expectedCounter: passkey.counter,
      counter: info.newCounter,
      deviceType: info.credentialDeviceType,
      backedUp: info.credentialBackedUp,
      at: this.deps.clock.now(),
    });
    if (!recorded) throw verificationFailed('signature counter moved meanwhile');
    return { userId: passkey.userId, amr: [PASSKEY_AMR], passkeyId: passkey.id };
  }

  // Management ---------------------------------------------------------------------------------------

  async list(userId: string): Promise<PasskeyView[]> {
    return (await listPasskeysOfUser(this.deps.db, userId)).map(toView);
  }

  async rename(userId: string, id: string, name: string): Promise<void> {
    const valid = passkeyName(name);
    if (valid === null) throw new AppError('invalid_request', { details: [{ path: 'name', message: 'must be 1–64 characters without control characters' }] });
    if (!(await renamePasskey(this.deps.db, userId, id, valid))) throw new AppError('not_found', { message: 'No such passkey.' });
  }

  /**
   * Removes one of the user's passkeys (`passkey.removed`); it stops working at once. The caller has
   * checked the session may change factors (Mfa.changeRefusal). The last factor takes the recovery codes with it.
   */
  async remove(userId: string, id: string, input: { via: string; appId?: string | null }, ctx: RequestContext): Promise<void> {
    const now = this.deps.clock.now();
    await this.deps.db.transaction().execute(async (trx) => {
      const removed = await deletePasskey(trx, userId, id);
      if (!removed) throw new AppError('not_found', { message: 'No such passkey.' });
      await appendEvent(trx, now, { type: 'passkey.removed', appId: input.appId ?? null, userId, ip: ctx.ip, userAgent: ctx.userAgent, data: { passkey_id: id, via: input.via } });
      await this.deps.factors.dropOrphanRecoveryCodes(trx, userId);
    });
  }

  // Challenges ---------------------------------------------------------------------------------------

  private async storeChallenge(purpose: keyof typeof KIND, challenge: string, input: { userId: string | null; appId: string | null; binding: Binding }): Promise<void> {
    const now = this.deps.clock.now();
    await insertOneTimeToken(this.deps.db, {
      id: newId('ott'),
      kind: KIND[purpose],
      token_hash: hashSecret(challenge),
      code_hash: null,
      user_id: input.userId,
      email: null,
      app_id: input.appId,
      data: JSON.stringify({ binding: input.binding }),
      attempts: 0,
      created_at: now,
      expires_at: now + CHALLENGE_TTL_SECONDS,
      consumed_at: null,
    });
  }

  /**
   * Takes (consumes) the live challenge an answer names, once; it must have been issued for this
   * purpose to this binding (and user, when one is named). Returns the challenge and the user it
   * was issued for (null: any user, a discoverable sign-in).
   */
  private async takeChallenge(
    purpose: keyof typeof KIND,
    response: { response: { clientDataJSON: string } },
    expected: { userId: string | null; binding: Binding; expected?: string },
  ): Promise<{ challenge: string; userId: string | null }> {
    const { decodeClientDataJSON } = await webauthn();
    let challenge: string;
    try {
      challenge = decodeClientDataJSON(response.response.clientDataJSON).challenge;
    } catch (error) {
      throw new AppError('invalid_request', { details: [{ path: 'response.response.clientDataJSON', message: 'is not base64url-encoded client data JSON' }], cause: error });
    }
    if (typeof challenge !== 'string' || challenge.length === 0 || challenge.length > 200) throw challengeUnusable();
    if (expected.expected !== undefined && expected.expected !== challenge) throw challengeUnusable();
    const row = await takeOneTimeTokenByHash(this.deps.db, KIND[purpose], hashSecret(challenge), this.deps.clock.now());
    if (!row) throw challengeUnusable();
    let binding: unknown;
    try {
      binding = (JSON.parse(row.data) as { binding?: unknown }).binding;
    } catch {
      binding = undefined;
    }
    if (binding !== expected.binding) throw challengeUnusable();
    if (row.user_id !== expected.userId && (expected.userId !== null || purpose === 'registration')) throw challengeUnusable();
    return { challenge, userId: row.user_id };
  }
}

/**
 * Where a passkey may sign in: an account-wide one anywhere (Gatehouse's pages, any app, as a second
 * factor); one scoped to an app only at that app's own sign-in, never as a second factor and never on
 * Gatehouse's pages (`appId` null), the console's sign-in included.
 */
export function usableAt(passkey: Pick<Passkey, 'appId'>, appId: string | null, secondFactor: boolean): boolean {
  if (passkey.appId === null) return true;
  return !secondFactor && passkey.appId === appId;
}

function toView(passkey: Passkey): PasskeyView {
  return {
    id: passkey.id,
    name: passkey.name,
    deviceType: passkey.deviceType,
    backedUp: passkey.backedUp,
    appId: passkey.appId,
    createdAt: isoTime(passkey.createdAt),
    lastUsedAt: passkey.lastUsedAt === null ? null : isoTime(passkey.lastUsedAt),
  };
}
