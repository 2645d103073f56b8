import { z } from 'zod';
import { DisplayName, EmailAddress } from '../shared/user-fields.js';

/** Request schemas of the admin API (docs/reference/rest-api.md#admin). */

export const CreateDeveloperBody = z.strictObject({
  // `ops@localhost` is fine: it identifies the developer, nothing is mailed to it.
  email: EmailAddress,
  name: DisplayName.optional(),
});
export type CreateDeveloperInput = z.output<typeof CreateDeveloperBody>;

/** Integers in a query string: digits only (no `1e3`, `0x10` or blanks, which coercion would take). */
const queryInt = (max: number, fallback: number) =>
  z
    .string()
    .regex(/^[0-9]{1,9}$/, 'must be a positive integer')
    .transform(Number)
    .pipe(z.number().int().min(1).max(max))
    .default(fallback);

/** Unknown parameters are refused, as on every listing. */
export const UserListQuery = z.strictObject({
  q: z.string().trim().max(200).optional().describe('Case-insensitive substring of email or name.'),
  status: z.enum(['active', 'disabled']).optional(),
  page: queryInt(10_000_000, 1).describe('From 1.'),
  pageSize: queryInt(100, 20).describe('1–100.'),
});
export type UserListInput = z.output<typeof UserListQuery>;

export const UserParams = z.object({ id: z.string().min(1).max(200) });

export const UpdateUserBody = z.strictObject({ status: z.enum(['active', 'disabled']) });

export const Developer = z.object({ id: z.string(), email: z.string(), name: z.string(), created_at: z.string() }).meta({ id: 'Developer' });
export const CreatedDeveloper = Developer.extend({ api_key: z.string().describe('The developer API key (`dk_…`), shown only here.') });
export const DeveloperList = z.object({ items: z.array(Developer) });

export const AdminUser = z
  .object({
    id: z.string(),
    email: z.string(),
    email_verified: z.boolean(),
    name: z.string().nullable(),
    phone_number: z.string().nullable(),
    birthdate: z.string().nullable(),
    created_at: z.string(),
    status: z.enum(['active', 'disabled']),
    idp_bound: z.boolean(),
    deletion_scheduled_at: z
      .string()
      .nullable()
      .describe('When the account is purged, if the person asked to delete it (docs/account/deletion.md); null otherwise. `DELETE /v1/admin/users/{id}/deletion` cancels it.'),
  })
  .meta({ id: 'AdminUser', description: 'An end user as the admin sees it.' });
export const AdminUserPage = z.object({ items: z.array(AdminUser), page: z.number().int(), pageSize: z.number().int(), total: z.number().int() });

export const RotatedKeys = z.object({ kids: z.array(z.string()).describe('Key ids of the new signing keys.') });

/** Listings take only the parameters they name. */
export const NoQuery = z.strictObject({});
