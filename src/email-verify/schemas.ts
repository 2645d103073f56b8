import { z } from 'zod';

/** `POST /v1/email_verify/confirm` body (docs/reference/rest-api.md#email-verification). */
export const ConfirmBody = z.object({ code: z.string().min(1).max(20) });

export const CodeSent = z.object({ status: z.literal('sent'), expires_in: z.number().int().describe('Seconds the code stays valid.') });
export const EmailVerified = z.object({ email_verified: z.literal(true) });
