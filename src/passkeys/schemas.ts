import { z } from 'zod';
import { ClientId, ClientSecret } from '../shared/schemas.js';
import { PASSKEY_NAME_MAX } from './names.js';

/**
 * Request and response bodies of the passkey routes. The WebAuthn objects are the JSON forms that
 * `@simplewebauthn/browser` (`startRegistration`, `startAuthentication`) and the browser's own
 * `PublicKeyCredential.toJSON()` produce (WebAuthn Level 3 §5.1.8, §5.1.9).
 */

const Base64Url = z.string().min(1).max(16_384).regex(/^[A-Za-z0-9_-]+$/, 'must be base64url');

const ExtensionOutputs = z.record(z.string(), z.unknown()).default({}).describe('Client extension results (not used).');
const Attachment = z.enum(['platform', 'cross-platform']).optional();

export const RegistrationResponse = z
  .object({
    id: Base64Url.max(1400),
    rawId: Base64Url.max(1400),
    type: z.literal('public-key'),
    response: z.object({
      clientDataJSON: Base64Url,
      attestationObject: Base64Url,
      authenticatorData: Base64Url.optional(),
      transports: z.array(z.string().max(40)).max(10).optional(),
      publicKeyAlgorithm: z.number().int().optional(),
      publicKey: Base64Url.optional(),
    }),
    authenticatorAttachment: Attachment,
    clientExtensionResults: ExtensionOutputs,
  })
  .meta({ id: 'PasskeyRegistrationResponse', description: 'The answer of `navigator.credentials.create()` as JSON (`RegistrationResponseJSON`).' });

export const AuthenticationResponse = z
  .object({
    id: Base64Url.max(1400),
    rawId: Base64Url.max(1400),
    type: z.literal('public-key'),
    response: z.object({
      clientDataJSON: Base64Url,
      authenticatorData: Base64Url,
      signature: Base64Url,
      userHandle: Base64Url.max(200).optional(),
    }),
    authenticatorAttachment: Attachment,
    clientExtensionResults: ExtensionOutputs,
  })
  .meta({ id: 'PasskeyAuthenticationResponse', description: 'The answer of `navigator.credentials.get()` as JSON (`AuthenticationResponseJSON`).' });

const CredentialDescriptor = z.object({ id: z.string(), type: z.literal('public-key'), transports: z.array(z.string()).optional() });

export const RegistrationOptions = z
  .object({
    rp: z.object({ id: z.string().optional(), name: z.string() }),
    user: z.object({ id: z.string().describe('The user handle, base64url.'), name: z.string(), displayName: z.string() }),
    challenge: z.string().describe('base64url; answer within 5 minutes, once.'),
    pubKeyCredParams: z.array(z.object({ type: z.literal('public-key'), alg: z.number().int() })),
    timeout: z.number().int().optional(),
    excludeCredentials: z.array(CredentialDescriptor).optional().describe('Passkeys the user already has.'),
    authenticatorSelection: z
      .object({
        authenticatorAttachment: z.string().optional(),
        residentKey: z.string().optional(),
        requireResidentKey: z.boolean().optional(),
        userVerification: z.string().optional(),
      })
      .optional(),
    hints: z.array(z.string()).optional(),
    attestation: z.string().optional(),
    attestationFormats: z.array(z.string()).optional(),
    extensions: z.object({ credProps: z.boolean().optional() }).optional(),
  })
  .meta({ id: 'PasskeyRegistrationOptions', description: 'Options for `navigator.credentials.create()` as JSON (`PublicKeyCredentialCreationOptionsJSON`): a discoverable credential with user verification.' });

export const AuthenticationOptions = z
  .object({
    challenge: z.string().describe('base64url; answer within 5 minutes, once.'),
    timeout: z.number().int().optional(),
    rpId: z.string().optional(),
    allowCredentials: z.array(CredentialDescriptor).optional().describe('Empty: any passkey of this site (discoverable credentials).'),
    userVerification: z.string().optional(),
    hints: z.array(z.string()).optional(),
  })
  .meta({ id: 'PasskeyAuthenticationOptions', description: 'Options for `navigator.credentials.get()` as JSON (`PublicKeyCredentialRequestOptionsJSON`).' });

export const PasskeyName = z.string().max(400).optional().describe(`A name for the passkey (1–${PASSKEY_NAME_MAX} characters); default "Passkey <date>".`);

export const Passkey = z
  .object({
    id: z.string().describe('`pk_…`'),
    name: z.string(),
    device_type: z.enum(['singleDevice', 'multiDevice']).describe('`multiDevice`: a synced passkey.'),
    backed_up: z.boolean(),
    app_id: z.string().nullable().describe('The app this passkey signs in at, and only there (it registered it); null: account-wide (added on the hosted account page).'),
    created_at: z.string().describe('RFC 3339 UTC.'),
    last_used_at: z.string().nullable(),
  })
  .meta({ id: 'Passkey', description: 'A registered passkey (never its key).' });

/** `POST /v1/auth/passkey/options`: the app that asks (it renders its own sign-in UI). */
export const SignInOptionsBody = z.object({ client_id: ClientId });

export const SignInVerifyBody = z.object({ client_id: ClientId, client_secret: ClientSecret, response: AuthenticationResponse });

export const RegisterVerifyBody = z.object({ response: RegistrationResponse, name: PasskeyName });

/** The page script's requests: the session's CSRF token (the same as its forms carry). */
export const PageOptionsBody = z.object({ csrf: z.string().min(1).max(200) });
