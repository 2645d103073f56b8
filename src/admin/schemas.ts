import { z } from 'zod';
import { DisplayName, EmailAddress } from '../shared/user-fields.js';

/** Request schemas of the admin API (CONTRACT §10). */

export const CreateDeveloperBody = z.strictObject({
  // `ops@localhost` is fine: it identifies the developer, nothing is mailed to it.
  email: EmailAddress,
  name: DisplayName.optional(),
});
export type CreateDeveloperInput = z.output<typeof CreateDeveloperBody>;

export const UserListQuery = z.object({
  q: z.string().trim().max(200).optional(),
  status: z.enum(['active', 'disabled']).optional(),
  page: z.coerce.number().int().min(1).max(10_000_000).default(1),
  pageSize: z.coerce.number().int().min(1).max(100).default(20),
});
export type UserListInput = z.output<typeof UserListQuery>;

export const UserParams = z.object({ id: z.string().min(1).max(200) });

export const UpdateUserBody = z.strictObject({ status: z.enum(['active', 'disabled']) });
