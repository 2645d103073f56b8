import { z } from 'zod';
import { ClientId, ClientSecret } from '../shared/schemas.js';
import { DisplayName, EmailAddress } from '../shared/user-fields.js';
import { PASSWORD_FIELD_MAX } from './passwords.js';

/** Request bodies of `/v1/auth/*` (docs/reference/rest-api.md#end-user-sign-in, docs/reference/rest-api.md#refresh-logout-and-single-use-values). Unknown fields are ignored. */

export const Email = EmailAddress;

/** Any string up to the size a valid password can have: longer ones are refused before hashing. */
export const Password = z.string().min(1).max(PASSWORD_FIELD_MAX, `must be at most 128 characters`);


export const RegisterBody = z.object({
  email: Email,
  password: Password,
  name: DisplayName.optional(),
  client_id: ClientId,
  client_secret: ClientSecret,
  accept_terms: z.boolean().optional(),
});

export const LoginBody = z.object({
  email: Email,
  password: Password,
  new_password: Password.optional().describe(
    'Only after 403 `password_expired` (the app\'s maximum password age, docs/guides/password-policy.md): the new password, checked against the app\'s policy; the sign-in then goes on with it.',
  ),
  client_id: ClientId,
  client_secret: ClientSecret,
  cancel_deletion: z
    .boolean()
    .optional()
    .describe('Keep an account whose deletion is scheduled (docs/account/deletion.md): without it such a sign-in answers 403 `account_deletion_scheduled`; an account with a second factor is kept on the hosted pages only (403 `forbidden`).'),
});

export const MagicLinkRequestBody = z.object({ email: Email, client_id: ClientId, redirect_uri: z.string().min(1).max(2000).optional() });

export const MagicLinkVerifyBody = z
  .object({
    token: z.string().min(1).max(200).optional(),
    email: Email.optional(),
    code: z.string().min(1).max(20).optional(),
    client_id: ClientId,
    client_secret: ClientSecret,
  })
  .refine((b) => (b.token !== undefined) !== (b.email !== undefined || b.code !== undefined), { message: 'send either token, or email and code' })
  .refine((b) => b.token !== undefined || (b.email !== undefined && b.code !== undefined), { message: 'email and code go together' });

export const PasswordForgotBody = MagicLinkRequestBody;

export const PasswordResetBody = z.object({ reset_token: z.string().min(1).max(200), password: Password, client_id: ClientId });

export const RefreshBody = z.object({ refresh_token: z.string().min(1).max(200), client_id: ClientId, client_secret: ClientSecret, scope: z.string().max(500).optional() });

export const LogoutBody = z.object({ refresh_token: z.string().min(1).max(200), all: z.boolean().optional(), client_id: ClientId });

export const ProfileCompleteBody = z.object({
  session: z.string().min(1).max(4000),
  client_id: ClientId,
  client_secret: ClientSecret,
  /** Checked by the one profile-data rule (sign-in/profile-data.ts): only the app's missing required fields. */
  data: z
    .strictObject({
      name: z.string().max(400).optional(),
      phone_number: z.string().max(40).optional(),
      birthdate: z.string().max(20).optional(),
    })
    .default({}),
});

/** `202` of the mail requests: the same for every address (docs/reference/rest-api.md#enumeration). */
export const MailSent = z.object({ status: z.literal('sent') });
