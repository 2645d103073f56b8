import { z } from 'zod';

/** docs/reference/rest-api.md#profile-cache: the stored document's limits. */
export const PROFILE_MAX_BYTES = 64 * 1024;
export const PROFILE_MAX_DEPTH = 32;
/** Route body limit: a little over the data limit, so an oversized `data` gets our own 413 check. */
export const PROFILE_BODY_LIMIT = PROFILE_MAX_BYTES + 32 * 1024;

export const ProfileParams = z.strictObject({ userId: z.string().min(1).max(200).describe('The token subject (`sub`).') });

/** The shape only; nesting depth, forbidden keys and the serialized size are checked by the service. */
export const ProfileBody = z.strictObject({
  data: z.record(z.string(), z.unknown()).describe(`Any JSON object: at most ${PROFILE_MAX_BYTES} bytes serialized, nesting at most ${PROFILE_MAX_DEPTH} levels (data = 1), no \`__proto__\`, \`constructor\` or \`prototype\` keys.`),
});

/** `X-Client-Id` (the other headers pass through untouched: this schema documents, the scope's hook checks). */
export const ProfileHeaders = z.looseObject({
  'x-client-id': z.string().optional().describe('The app; must equal the access token\'s `client_id`. Required.'),
  'if-match': z.string().optional().describe('Entity tags (`"<version>"`) or `*`: write only over that version (412 otherwise).'),
});

export const ProfileResponse = z
  .object({
    userId: z.string(),
    data: z.record(z.string(), z.unknown()),
    updated_at: z.string().describe('RFC 3339 UTC.'),
    version: z.number().int().describe('Increases with every write; the ETag is `"<version>"`.'),
  })
  .meta({ id: 'Profile', description: 'The profile document of one (app, user) (docs/reference/rest-api.md#profile-cache).' });

export interface ProfileView {
  userId: string;
  data: Record<string, unknown>;
  updated_at: string;
  version: number;
}
