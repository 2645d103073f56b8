import { z } from 'zod';
import { DisplayName, EmailAddress } from '../shared/user-fields.js';

/** Schemas of the user import and export (docs/guides/migrating-users.md). */

/** Most users one request (or one CLI run's batch) takes. */
export const IMPORT_MAX_USERS = 10_000;
/** The import's body limit: 10,000 users with long hashes fit several times over; anything larger is refused with 413. */
export const IMPORT_BODY_LIMIT = 16 * 1024 * 1024;

/** RFC 4648 base32 (an authenticator app's secret), spaces and padding allowed. */
const BASE32 = /^[A-Z2-7]+$/;

/**
 * One user to import. The email, name, phone and birthdate are checked by the same rules as
 * registration and the profile step (the phone and birthdate in the service, which has the clock).
 */
export const ImportUser = z
  .strictObject({
    email: EmailAddress,
    email_verified: z.boolean().optional().describe('Default false: the person proves the address at the first mailed code.'),
    name: DisplayName.nullable().optional(),
    phone_number: z.string().max(40).nullable().optional().describe('E.164 (`+4915123456789`); spaces, dots, dashes and brackets are removed.'),
    birthdate: z.string().max(10).nullable().optional().describe('`YYYY-MM-DD`, not in the future, not before 1900.'),
    created_at: z.iso.datetime({ offset: true }).optional().describe('When the account was created where it comes from (ISO 8601); default: the import time.'),
    status: z.enum(['active', 'disabled']).optional().describe('Default `active`.'),
    external_id: z.string().trim().min(1).max(255).optional().describe('The id the user had where it comes from; unique, kept for reference and for re-imports.'),
    password_hash: z
      .string()
      .max(1024)
      .nullable()
      .optional()
      .describe('bcrypt, argon2id/argon2i PHC, scrypt PHC, PBKDF2 PHC or Django, or (with `password_salt`) a Firebase scrypt hash. Absent: no password.'),
    password_salt: z.string().max(256).optional().describe("Firebase only: the user's `salt` from `auth:export` (base64)."),
    totp_secret: z
      .string()
      .max(200)
      .transform((s) => s.replace(/[\s=]/g, '').toUpperCase())
      .refine((s) => BASE32.test(s) && s.length >= 16 && s.length <= 128, 'must be a base32 secret of 16–128 characters')
      .optional()
      .describe('An authenticator-app (TOTP, 30 s, 6 digits, SHA-1) secret in base32: the user keeps their second factor.'),
    apps: z
      .array(z.strictObject({ client_id: z.string().min(1).max(200), consent: z.boolean().optional().describe('Also record consent to the default scopes (`openid profile email`).') }))
      .max(50)
      .optional()
      .describe('Apps the user is a user of.'),
  })
  .meta({ id: 'ImportUser', description: 'One user of an import; the export writes the same shape.' });
export type ImportUserInput = z.output<typeof ImportUser>;

/** The Firebase project's password hash parameters, as its console shows them. */
export const FirebaseScryptParameters = z
  .strictObject({
    base64_signer_key: z.string().min(1).max(400),
    base64_salt_separator: z.string().max(200),
    rounds: z.number().int().min(1).max(64),
    mem_cost: z.number().int().min(1).max(30),
  })
  .meta({ id: 'FirebaseScryptParameters', description: "A Firebase project's password hash parameters (console → Authentication → Users → Password hash parameters)." });

const Rows = z.array(z.unknown()).max(IMPORT_MAX_USERS).describe('Users (`ImportUser`), each checked on its own: a bad one is reported, the rest are imported.');

export const ImportBody = z
  .union([
    Rows,
    z.strictObject({ users: Rows, firebase_scrypt: FirebaseScryptParameters.optional() }),
    z.string().describe('`application/x-ndjson`: one `ImportUser` per line; a first line `{"firebase_scrypt": {…}}` gives the Firebase parameters.'),
  ])
  .describe('A JSON array of users, an object with `users` (and `firebase_scrypt`), or NDJSON.');

const flag = z.enum(['true', 'false']).transform((v) => v === 'true');

export const ImportQuery = z.strictObject({
  dry_run: flag.default(false).describe('`true`: check every row and report, write nothing.'),
  app: z.string().min(1).max(200).optional().describe('Make every imported user a user of this app (its client id).'),
});

export const ImportRowResult = z.object({
  line: z.number().int().describe('The row: its line in NDJSON, its position (from 1) in a JSON array.'),
  status: z.enum(['created', 'unchanged', 'conflict', 'invalid']),
  email: z.string().optional(),
  user_id: z.string().optional().describe('The new user (`created`, not in a dry run) or the existing one (`unchanged`, `conflict`).'),
  reason: z.string().optional().describe('Why the row was not imported.'),
  details: z
    .array(z.object({ path: z.string(), message: z.string() }))
    .optional()
    .describe('Why the row was not imported; for a `created` row with a password, the apps whose password policy asks for a new one at the first sign-in.'),
});

export const ImportResult = z
  .object({
    dry_run: z.boolean(),
    summary: z.object({ created: z.number().int(), unchanged: z.number().int(), conflict: z.number().int(), invalid: z.number().int() }),
    results: z.array(ImportRowResult),
  })
  .meta({ id: 'ImportResult', description: 'One result per row, in order.' });
export type ImportResultView = z.output<typeof ImportResult>;
export type ImportRowResultView = z.output<typeof ImportRowResult>;

export const ExportQuery = z.strictObject({
  app: z.string().min(1).max(200).optional().describe('Only the users of this app (its client id).'),
  include_password_hashes: flag.default(false).describe('`true`: also the password hashes and authenticator-app secrets (recorded as a `users.exported` event).'),
  include_apps: flag.default(false).describe('`true`: also the apps each user is a user of (an import needs apps of the same client ids).'),
});
