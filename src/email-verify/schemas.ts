import { z } from 'zod';

/** `POST /v1/email_verify/confirm` body (CONTRACT §6). */
export const ConfirmBody = z.object({ code: z.string().min(1).max(20) });
