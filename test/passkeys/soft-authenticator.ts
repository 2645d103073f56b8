import { isoCBOR } from '@simplewebauthn/server/helpers';
import { createHash, generateKeyPairSync, type KeyObject, randomBytes, sign } from 'node:crypto';

/**
 * A software WebAuthn authenticator for `app.inject` tests (the browser tests use Chromium's virtual
 * authenticator): it makes ES256 passkeys with `none` attestation and answers `navigator.credentials`
 * options the way a browser would, in the JSON forms of WebAuthn Level 3. Every bit a test may need to
 * bend — origin, signature counter, flags — is a parameter.
 */

export interface SoftCredential {
  id: string;
  rpId: string;
  userHandle: string;
  privateKey: KeyObject;
  signCount: number;
  /** Backup eligible and backed up: a synced ("multi-device") passkey. */
  synced: boolean;
}

const b64url = (bytes: Uint8Array | string) => Buffer.from(bytes).toString('base64url');
const sha256 = (data: Uint8Array | string) => createHash('sha256').update(data).digest();

type Cbor = Parameters<typeof isoCBOR.encode>[0];

const FLAG = { up: 0x01, uv: 0x04, be: 0x08, bs: 0x10, at: 0x40 } as const;

export interface RegistrationOptionsLike {
  challenge: string;
  rp: { id?: string };
  user: { id: string };
}

export interface AuthenticationOptionsLike {
  challenge: string;
  rpId?: string;
  allowCredentials?: Array<{ id: string }>;
}

export class SoftAuthenticator {
  readonly credentials: SoftCredential[] = [];

  constructor(private readonly defaults: { origin: string; synced?: boolean }) {}

  private flags(credential: SoftCredential, uv: boolean, extra = 0): number {
    return FLAG.up | (uv ? FLAG.uv : 0) | (credential.synced ? FLAG.be | FLAG.bs : 0) | extra;
  }

  private counter(value: number): Buffer {
    const buf = Buffer.alloc(4);
    buf.writeUInt32BE(value);
    return buf;
  }

  /** `navigator.credentials.create()`: a new passkey for the options' user, as RegistrationResponseJSON. */
  create(options: RegistrationOptionsLike, input: { origin?: string; uv?: boolean } = {}) {
    const { privateKey, publicKey } = generateKeyPairSync('ec', { namedCurve: 'P-256' });
    const jwk = publicKey.export({ format: 'jwk' });
    const rawId = randomBytes(16);
    const credential: SoftCredential = { id: b64url(rawId), rpId: options.rp.id!, userHandle: options.user.id, privateKey, signCount: 0, synced: this.defaults.synced ?? false };
    this.credentials.push(credential);
    const cose = isoCBOR.encode(
      new Map<number, number | Uint8Array>([
        [1, 2],
        [3, -7],
        [-1, 1],
        [-2, new Uint8Array(Buffer.from(jwk.x!, 'base64url'))],
        [-3, new Uint8Array(Buffer.from(jwk.y!, 'base64url'))],
      ]),
    );
    const idLength = Buffer.alloc(2);
    idLength.writeUInt16BE(rawId.length);
    const authData = Buffer.concat([
      sha256(credential.rpId),
      Buffer.from([this.flags(credential, input.uv ?? true, FLAG.at)]),
      this.counter(0),
      Buffer.alloc(16), // AAGUID: none
      idLength,
      rawId,
      Buffer.from(cose),
    ]);
    const attestationObject = isoCBOR.encode(new Map<string, Cbor>([['fmt', 'none'], ['attStmt', new Map<string, Cbor>()], ['authData', new Uint8Array(authData)]]));
    const clientDataJSON = JSON.stringify({ type: 'webauthn.create', challenge: options.challenge, origin: input.origin ?? this.defaults.origin, crossOrigin: false });
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key' as const,
      response: { clientDataJSON: b64url(clientDataJSON), attestationObject: b64url(attestationObject), transports: ['internal'] },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform' as const,
    };
  }

  /**
   * `navigator.credentials.get()`: an assertion by one of this authenticator's passkeys (one the options
   * allow, or any for this RP ID), as AuthenticationResponseJSON. The signature counter advances by one
   * unless `signCount` says what to report.
   */
  get(options: AuthenticationOptionsLike, input: { origin?: string; uv?: boolean; signCount?: number; credential?: SoftCredential } = {}) {
    const allowed = new Set((options.allowCredentials ?? []).map((c) => c.id));
    const credential = input.credential ?? this.credentials.find((c) => c.rpId === options.rpId && (allowed.size === 0 || allowed.has(c.id)));
    if (!credential) throw new Error('NotAllowedError: no passkey for these options');
    credential.signCount = input.signCount ?? credential.signCount + 1;
    const authData = Buffer.concat([sha256(credential.rpId), Buffer.from([this.flags(credential, input.uv ?? true)]), this.counter(credential.signCount)]);
    const clientDataJSON = JSON.stringify({ type: 'webauthn.get', challenge: options.challenge, origin: input.origin ?? this.defaults.origin, crossOrigin: false });
    const signature = sign('sha256', Buffer.concat([authData, sha256(clientDataJSON)]), credential.privateKey);
    return {
      id: credential.id,
      rawId: credential.id,
      type: 'public-key' as const,
      response: { clientDataJSON: b64url(clientDataJSON), authenticatorData: b64url(authData), signature: b64url(signature), userHandle: credential.userHandle },
      clientExtensionResults: {},
      authenticatorAttachment: 'platform' as const,
    };
  }
}
