import { z } from 'zod';

/**
 * Shapes of the OAuth endpoints. The handlers read parameters through `params.ts` (every parameter
 * at most once, unknown ones ignored, RFC 6749 §3.1); these schemas document and bound the bodies.
 */

/** Any form or JSON object of parameters; repeated keys arrive as arrays and are refused by the handler. */
export const ParamsBody = z.record(z.string(), z.unknown()).optional();

export const TokenResponse = z.object({
  access_token: z.string(),
  token_type: z.literal('Bearer'),
  expires_in: z.number().int(),
  refresh_token: z.string(),
  scope: z.string(),
  id_token: z.string().optional(),
});

export const LogoutQuery = z.object({
  client_id: z.string().max(200).optional(),
  post_logout_redirect_uri: z.string().max(2000).optional(),
  state: z.string().max(4096).optional(),
  ui_locales: z.string().max(100).optional(),
});
