import { z } from 'zod';

/**
 * Dynamic client registration (RFC 7591/7592, docs/reference/oauth.md#dynamic-client-registration-rfc-7591).
 * The registration body is checked by the service (parseClientMetadata), so a bad value is the RFC's
 * `invalid_client_metadata` / `invalid_redirect_uri` and not a generic 400; the schema only documents the fields.
 */

export const ClientMetadataBody = z
  .looseObject({
    redirect_uris: z.unknown().optional().describe('Required, an array of strings: https (http only for loopback hosts) or a private-use scheme, exact, no fragment (the developer API rules).'),
    token_endpoint_auth_method: z.unknown().optional().describe('`none` (public, PKCE), `client_secret_basic` (default) or `client_secret_post`; open registration: `none` only.'),
    grant_types: z.unknown().optional().describe('An array: `authorization_code`, optionally `refresh_token`.'),
    response_types: z.unknown().optional().describe('An array: `code` only.'),
    client_name: z.unknown().optional().describe('Shown on the consent page; 1 to 100 characters.'),
    client_id: z.unknown().optional().describe('PUT only: the client being updated.'),
  })
  .describe('Client metadata (RFC 7591 §2); other fields are ignored.')
  .meta({ id: 'ClientMetadata' });

export const ClientRegistration = z
  .object({
    client_id: z.string(),
    client_id_issued_at: z.number().int(),
    client_secret: z.string().optional().describe('Confidential clients, in the registration answer only.'),
    client_secret_expires_at: z.number().int().optional().describe('0: does not expire.'),
    registration_access_token: z.string().optional().describe('For RFC 7592 management of this client; in the registration answer only.'),
    registration_client_uri: z.string(),
    client_name: z.string(),
    redirect_uris: z.array(z.string()),
    grant_types: z.array(z.string()),
    response_types: z.array(z.string()),
    token_endpoint_auth_method: z.enum(['none', 'client_secret_basic', 'client_secret_post']),
    quarantined: z.boolean().describe('Registered openly and not yet approved by the operator: the client cannot sign anyone in.'),
  })
  .meta({ id: 'ClientRegistration' });

export const RegistrationParams = z.strictObject({ client_id: z.string().min(1).max(200) });

export const CreateInitialAccessTokenBody = z.strictObject({
  name: z.string().trim().min(1).max(100).describe('What the token is for (shown in listings).'),
  expires_in_days: z.number().int().min(1).max(90).default(7).describe('Days the token can register clients (1–90, default 7).'),
  single_use: z.boolean().default(true).describe('true (default): good for one registration.'),
});

export const InitialAccessToken = z
  .object({
    id: z.string(),
    name: z.string(),
    single_use: z.boolean(),
    created_at: z.string(),
    expires_at: z.string(),
    used_at: z.string().nullable(),
    revoked_at: z.string().nullable(),
    token: z.string().optional().describe('The token itself: shown only when it is created (only its SHA-256 is stored).'),
  })
  .meta({ id: 'InitialAccessToken' });

export const InitialAccessTokenList = z.object({ items: z.array(InitialAccessToken) });
export const InitialAccessTokenParams = z.strictObject({ id: z.string().min(1).max(100) });

export const QuarantinedClientList = z.object({
  items: z.array(z.object({ client_id: z.string(), client_name: z.string(), redirect_uris: z.array(z.string()), registered_at: z.string() })),
});
export const QuarantinedClientParams = z.strictObject({ client_id: z.string().min(1).max(200) });
