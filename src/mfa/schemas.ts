import { z } from 'zod';
import { ClientId, ClientSecret } from '../shared/schemas.js';
import { AuthenticationResponse } from '../passkeys/index.js';

/** Bodies and answers of the second-factor step of REST sign-in (`/v1/auth/mfa/*`, docs/guides/mfa-and-passkeys.md). */

const PendingSession = z.string().min(1).max(4000).describe('The `session` of a `pending` answer with `next_step: "mfa"`.');

export const MfaVerifyBody = z
  .object({
    session: PendingSession,
    code: z
      .string()
      .trim()
      .min(1)
      .max(40)
      .optional()
      .describe('Six digits from the authenticator app, or one of the recovery codes (`xxxxx-xxxxx`). With `enroll`, the first code of the app being set up.'),
    passkey: AuthenticationResponse.optional().describe('Instead of `code`: the answer of `navigator.credentials.get()` to options from `POST /v1/auth/mfa/passkey/options`.'),
    client_id: ClientId,
    client_secret: ClientSecret,
  })
  .refine((body) => (body.code === undefined) !== (body.passkey === undefined), { message: 'send exactly one of code and passkey', path: ['code'] });

export const MfaPasskeyOptionsBody = z.object({ session: PendingSession, client_id: ClientId, client_secret: ClientSecret });

export const TotpSetupBody = z.object({ session: PendingSession, client_id: ClientId, client_secret: ClientSecret });

export const TotpSetup = z
  .object({
    secret: z.string().describe('The base32 secret, for typing into the app by hand.'),
    otpauth_uri: z.string().describe('`otpauth://totp/…`: what the QR code holds.'),
  })
  .meta({ id: 'TotpSetup', description: 'An authenticator app to set up; confirm it with its first code at `POST /v1/auth/mfa/verify`.' });
