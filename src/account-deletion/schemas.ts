import { z } from 'zod';

/** `DELETE /v1/auth/account` body (docs/account/deletion.md). */
export const DeleteAccountBody = z.object({
  password: z.string().max(1024).optional().describe('The current password (required: an account without one is deleted on the account page).'),
  code: z
    .string()
    .max(64)
    .optional()
    .describe('A code from the authenticator app or an unused recovery code (required when the account has a second factor).'),
});

export const DeletionScheduled = z.object({
  status: z.enum(['scheduled', 'deleted']).describe('`scheduled`: purged at `deletion_scheduled_at`; `deleted`: purged already (ACCOUNT_DELETION_GRACE_DAYS=0).'),
  deletion_scheduled_at: z.string().describe('When the account is (or was) purged (ISO 8601).'),
});

/** What the admin and developer APIs show of a scheduled deletion, beside the user. */
export const DeletionField = z.string().nullable().describe('When the account is purged, if the person asked to delete it (ISO 8601); null otherwise.');
