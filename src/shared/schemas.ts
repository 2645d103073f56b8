import { z } from 'zod';

/**
 * Request fields and response objects that more than one feature takes or answers with (docs/reference/tokens.md,
 * docs/reference/rest-api.md#end-user-sign-in). Each response object is registered with an id, so the OpenAPI document shows it once, as a component.
 */

/** `limit` of a cursor-paged listing: a plain integer 1–100 in the query string. */
export const PageLimit = z
  .string()
  .regex(/^[0-9]{1,3}$/, 'must be an integer 1–100')
  .transform(Number)
  .pipe(z.number().int().min(1).max(100))
  .optional();

export const ClientId = z.string().min(1).max(200).optional();
/** A confidential app's secret (`client_secret_post`, docs/reference/oauth.md#policies) on the requests that issue or rotate its tokens. */
export const ClientSecret = z.string().min(1).max(500).optional();

export const RequiredField = z.enum(['name', 'phone_number', 'birthdate', 'email_verified']);

export const PublicUser = z
  .object({
    id: z.string().describe('Stable user id (`usr_…`), the `sub` of every token.'),
    email: z.string(),
    email_verified: z.boolean(),
    name: z.string().nullable(),
    phone_number: z.string().nullable().describe('E.164.'),
    birthdate: z.string().nullable().describe('YYYY-MM-DD.'),
    created_at: z.string().describe('RFC 3339 UTC.'),
  })
  .meta({ id: 'PublicUser', description: 'What apps see of an end user (docs/reference/rest-api.md#end-user-sign-in).' });

const tokenFields = {
  access_token: z.string().describe('A JWT (RFC 9068), `ACCESS_TOKEN_TTL` seconds.'),
  token_type: z.enum(['Bearer', 'DPoP']).describe('`DPoP` when the request carried a DPoP proof: the access token is bound to its key (`cnf.jkt`, docs/reference/oauth.md).'),
  expires_in: z.number().int().describe('Seconds until the access token expires.'),
  refresh_token: z.string().describe('Opaque (`rt_…`); rotated on every use.'),
  scope: z.string(),
  id_token: z.string().optional().describe('With scope `openid`.'),
};

export const TokenResponse = z.object(tokenFields).meta({ id: 'TokenResponse', description: 'Token response (docs/reference/tokens.md), sent with `Cache-Control: no-store`.' });

export const SignInResult = z
  .union([
    z
      .object({
        status: z.literal('ok'),
        user: PublicUser,
        ...tokenFields,
        recovery_codes: z
          .array(z.string())
          .optional()
          .describe('Only when this sign-in set up the first second factor: ten one-time recovery codes, shown this once.'),
      })
      .meta({ id: 'SignInComplete', description: 'Signed in: the user and tokens.' }),
    z
      .object({
        status: z.literal('pending'),
        next_step: z.literal('mfa'),
        session: z.string().describe('A session JWT good only for `POST /v1/auth/mfa/verify` (and `/v1/auth/mfa/totp/setup`).'),
        methods: z.array(z.enum(['totp', 'passkey', 'recovery_code'])).describe('The second factors the user has (docs/guides/mfa-and-passkeys.md).'),
        enroll: z
          .array(z.literal('totp'))
          .optional()
          .describe('The app requires a second factor the user has not set up: set one up now (`POST /v1/auth/mfa/totp/setup`).'),
      })
      .meta({ id: 'SignInSecondFactor', description: 'The first factor was right; a second factor is due before the sign-in completes.' }),
    z
      .object({
        status: z.literal('pending'),
        next_step: z.enum(['profile', 'verify_email']),
        session: z.string().describe('A session JWT for finishing the step (`POST /v1/auth/profile/complete`, `/v1/email_verify/*`).'),
        required_fields: z.array(RequiredField),
      })
      .meta({ id: 'SignInPending', description: 'The app requires data the user lacks; finish the step with the session.' }),
  ])
  .meta({ id: 'SignInResult', description: 'Sign-in result of register, login, magic-link verify, passkey sign-in, profile complete and the second-factor step (docs/reference/rest-api.md#end-user-sign-in, docs/guides/mfa-and-passkeys.md).' });
