import { z } from 'zod';

/** CONTRACT §7 / §14.7: the stored document's limits. */
export const PROFILE_MAX_BYTES = 64 * 1024;
export const PROFILE_MAX_DEPTH = 32;
/** Route body limit: a little over the data limit, so an oversized `data` gets our own 413 check. */
export const PROFILE_BODY_LIMIT = PROFILE_MAX_BYTES + 32 * 1024;

export const ProfileParams = z.strictObject({ userId: z.string().min(1).max(200) });

export interface ProfileView {
  userId: string;
  data: Record<string, unknown>;
  updated_at: string;
  version: number;
}
