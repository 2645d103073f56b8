import { z } from 'zod';
import { PublicUser } from '../shared/schemas.js';

/** `POST /v1/auth/email/change` body (docs/account/email-change.md). */
export const ChangeBody = z.object({
  email: z.string().min(1).max(320).describe('The new address.'),
  password: z.string().max(1024).optional().describe('The current password (required: an account without one changes its address on the account page).'),
});

/** `POST /v1/auth/email/change/confirm` body. */
export const ConfirmBody = z.object({ code: z.string().min(1).max(20).describe('The 6-digit code mailed to the new address.') });

export const ChangePending = z.object({
  status: z.literal('pending'),
  expires_in: z.number().int().describe('Seconds the code and link stay valid.'),
});

export const EmailChanged = z.object({ user: PublicUser });
