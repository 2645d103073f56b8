import { z } from 'zod';
import { isValidVerifier } from '../sign-in/pkce.js';

/** Request schemas of the provider endpoints (docs/guides/identity-provider.md#start-and-callback, docs/guides/identity-provider.md#native-exchange-and-resume, docs/reference/rest-api.md#admin). */

const clientId = z.string().min(1).max(200);
const redirectUri = z.string().min(1).max(2000);
/** The app's `state`: as long as `/oauth/authorize` accepts, since the hosted login hands it over. */
const state = z.string().max(4096).optional();
/** Checked by the one PKCE rule (sign-in/pkce.ts) in the service, as at `/oauth/authorize`. */
const codeChallenge = z.string().max(200).optional();
const codeChallengeMethod = z.string().max(20).optional();
const responseMode = z.enum(['session', 'code']).optional();

/** `/oauth/idp/start`: unknown query parameters are ignored (RFC 6749 §3.1). Checked by hand so client errors render HTML. */
export const StartQuery = z.object({
  client_id: z.string().max(200).optional(),
  redirect_uri: z.string().max(2000).optional(),
  state,
  code_challenge: z.string().max(200).optional(),
  code_challenge_method: z.string().max(20).optional(),
  response_mode: z.string().max(20).optional(),
  /** Carried from a web authorization request (hosted login's "Continue with …"). */
  scope: z.string().max(500).optional(),
  nonce: z.string().max(512).optional(),
});

export const CallbackQuery = z.object({
  code: z.string().max(2048).optional(),
  state: z.string().max(200).optional(),
  iss: z.string().max(2000).optional(),
  error: z.string().max(200).optional(),
  error_description: z.string().max(2000).optional(),
});

/** What the app sends on both native calls (docs/guides/identity-provider.md#native-exchange-and-resume): who it is, where to, and the PKCE pair. */
const NativeAppParams = z.object({
  client_id: clientId,
  client_secret: z.string().min(1).max(512).optional().describe('A confidential app authenticates here (`client_secret_post`) or with HTTP Basic, as at `/oauth/token`.'),
  redirect_uri: redirectUri,
  state,
  code_challenge: codeChallenge,
  code_challenge_method: codeChallengeMethod,
  response_mode: responseMode,
  dpop_jkt: z
    .string()
    .regex(/^[A-Za-z0-9_-]{43}$/, 'must be a SHA-256 JWK thumbprint (base64url)')
    .optional()
    .describe('With `response_mode=code`: the SHA-256 JWK thumbprint of the DPoP key that must redeem the code (RFC 9449 §10); a `DPoP` proof on the request binds it too, and must then name the same key.'),
});

export const ExchangeBody = NativeAppParams.extend({
  id_token: z.string().min(1).max(16384).optional(),
  idp_code: z.string().min(1).max(2048).optional(),
  nonce: z.string().min(1).max(512).optional(),
  idp_redirect_uri: z.string().min(1).max(2000).optional(),
  idp_code_verifier: z.string().refine(isValidVerifier, 'must be 43–128 characters of [A-Za-z0-9-._~]').optional(),
});

export const ResumeBody = NativeAppParams.extend({
  session: z.string().min(1).max(4096),
  consent: z.string().max(8).optional(),
  code: z.string().trim().min(1).max(40).optional().describe('The second factor a `pending` `mfa` answer asked for: an authenticator-app code or a recovery code.'),
});

export const IdpSettingBody = z.strictObject({
  issuer: z.string().min(1).max(2000),
  client_id: z.string().min(1).max(500),
  client_secret: z.string().min(1).max(2000).nullable().optional(),
  audiences: z.array(z.string().min(1).max(500)).max(20).optional(),
  name: z.string().trim().min(1).max(100),
});

/** What exchange and resume answer (docs/guides/identity-provider.md#native-exchange-and-resume, docs/reference/rest-api.md#pending-sign-ins). */
export const NativeResult = z
  .union([
    z.object({ status: z.literal('ok'), response_mode: z.literal('session'), session: z.string().describe('A session JWT for the app.') }).meta({ id: 'NativeSession' }),
    z
      .object({ status: z.literal('ok'), response_mode: z.literal('code'), code: z.string().describe('An authorization code for `/oauth/token` (60 s).'), state: z.string().optional() })
      .meta({ id: 'NativeCode' }),
    z
      .object({
        status: z.literal('pending'),
        next_step: z.literal('mfa'),
        session: z.string().describe('Good only for `/oauth/idp/resume` with `code` (or `/v1/auth/mfa/verify`).'),
        methods: z.array(z.enum(['totp', 'passkey', 'recovery_code'])).describe('The second factors the user has.'),
        enroll: z.array(z.literal('totp')).optional().describe('The app requires a second factor the user has not set up yet: what can be set up now.'),
      })
      .meta({ id: 'NativeSecondFactor' }),
    z
      .object({
        status: z.literal('pending'),
        next_step: z.enum(['consent', 'profile']),
        session: z.string(),
        hosted_url: z.string().describe('`{auth_url}/continue?ticket=…`: single use, 10 minutes.'),
        authorize_params: z.object({ client_id: z.string(), redirect_uri: z.string(), response_mode: z.enum(['session', 'code']) }),
      })
      .meta({ id: 'NativePending' }),
  ])
  .meta({ id: 'NativeResult', description: 'Result of a native provider sign-in.' });

export const IdpSetting = z
  .object({
    issuer: z.string(),
    client_id: z.string(),
    audiences: z.array(z.string()),
    name: z.string(),
    has_client_secret: z.boolean().describe('The secret itself is never returned.'),
    source: z.enum(['env', 'settings']).describe('`env`: from IDP_* variables, which the API cannot change.'),
  })
  .meta({ id: 'IdpSetting', description: 'The external provider configuration.' });
