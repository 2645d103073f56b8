import { z } from 'zod';

/**
 * The data export (docs/account/data-export.md): one JSON document, `format`
 * `gatehouse.account-export/1`. Times are ISO 8601 (UTC). Fields are only ever added within a format
 * version; removing or renaming one makes a new version. Nothing here is a hash, secret, key or token.
 */

export const EXPORT_FORMAT = 'gatehouse.account-export/1';

const Time = z.string().describe('ISO 8601, UTC.');
const MaybeTime = Time.nullable();
const Amr = z.array(z.string()).describe('How the person signed in (RFC 8176 `amr` values).');

const Account = z.object({
  id: z.string().describe('The account id (the `sub` of every token).'),
  email: z.string(),
  email_verified: z.boolean(),
  name: z.string().nullable(),
  phone_number: z.string().nullable(),
  birthdate: z.string().nullable(),
  status: z.string().describe('`active` or `disabled`.'),
  has_password: z.boolean().describe('Whether a password is set (the password itself is never stored, and its hash never exported).'),
  password_changed_at: MaybeTime,
  created_at: Time,
  updated_at: Time,
  provider_identities: z
    .array(z.object({ issuer: z.string(), subject: z.string(), email: z.string().nullable(), bound_at: Time }))
    .describe('Accounts at the external identity provider bound to this one (`coverage: full` only).'),
});

const AppEntry = z.object({
  app_id: z.string(),
  name: z.string().nullable().describe('The app name now (null: the app was deleted).'),
  membership: z
    .object({ status: z.string().describe('`active` or `blocked` (by the app).'), joined_at: Time, last_sign_in_at: MaybeTime })
    .nullable()
    .describe('The person as a user of the app; null: none.'),
  consent: z.object({ scopes: z.array(z.string()), granted_at: Time, updated_at: Time }).nullable().describe('What the person allowed the app; null: nothing.'),
});

const Factors = z.object({
  authenticator_app: z.object({ created_at: Time, confirmed_at: MaybeTime }).nullable().describe('The authenticator app (TOTP): dates only, never its secret.'),
  recovery_codes: z
    .object({ total: z.number().int(), unused: z.number().int(), generated_at: MaybeTime })
    .describe('How many recovery codes there are and when they were made; never a code or its hash.'),
});

const PasskeyEntry = z.object({
  id: z.string(),
  name: z.string(),
  app_id: z.string().nullable().describe('The app this passkey signs in at, and only there; null: account-wide.'),
  synced: z.boolean().describe('A passkey that may be synced between devices (multi-device).'),
  backed_up: z.boolean(),
  created_at: Time,
  last_used_at: MaybeTime,
});

const AppSession = z.object({
  id: z.string().describe('The sign-in (`sid` of its ID tokens).'),
  app_id: z.string(),
  scopes: z.array(z.string()),
  amr: Amr,
  auth_time: Time,
  created_at: Time,
  expires_at: Time,
  revoked_at: MaybeTime,
  revoked_reason: z.string().nullable(),
  user_agent: z.string().nullable().describe('The user agent it was signed in from (null: unknown, or before this was recorded).'),
  ip_area: z.string().nullable().describe('The coarse area of the address it was signed in from (IPv4 /24, IPv6 /48); never the full address.'),
});

const BrowserSession = z.object({
  amr: Amr,
  auth_time: MaybeTime,
  created_at: Time,
  last_seen_at: Time,
  expires_at: Time,
  revoked_at: MaybeTime,
  user_agent: z.string().nullable().describe('The user agent it was signed in from.'),
  ip_area: z.string().nullable().describe('The coarse area of the address it was signed in from (IPv4 /24, IPv6 /48).'),
});

const ProfileEntry = z.object({
  app_id: z.string(),
  version: z.number().int(),
  data: z.record(z.string(), z.unknown()).describe('The document the app stored for the person, as stored.'),
  created_at: Time,
  updated_at: Time,
});

const LegalAcceptance = z.object({
  owner: z.string().describe('`platform`, or the id of the app whose document it is.'),
  doc_type: z.string(),
  lang: z.string(),
  version: z.number().int(),
  accepted_at: Time,
});

const EventEntry = z.object({
  id: z.string(),
  type: z.string(),
  app_id: z.string().nullable(),
  at: Time,
  ip: z.string().nullable(),
  user_agent: z.string().nullable(),
  data: z.record(z.string(), z.unknown()).describe('Details of the event (never a password, token, code or secret).'),
});

export const AccountExport = z
  .object({
    format: z.literal(EXPORT_FORMAT),
    exported_at: Time,
    coverage: z
      .enum(['full', 'app'])
      .describe(
        '`full`: everything of the account (the hosted account page). `app`: asked with an app\'s access token: the account, and of the apps only that app (its membership, consent, sign-ins, profile document, legal documents and events).',
      ),
    app_id: z.string().nullable().describe('With `coverage: app`: the app whose token asked.'),
    account: Account,
    apps: z.array(AppEntry),
    factors: Factors,
    passkeys: z.array(PasskeyEntry),
    sessions: z.object({
      apps: z.array(AppSession).describe('Sign-ins to apps (grants), revoked and expired ones included.'),
      browser: z.array(BrowserSession).describe('Signed-in browser sessions of the hosted pages (`coverage: full` only).'),
    }),
    profiles: z.array(ProfileEntry).describe('Profile documents, one per app.'),
    legal_acceptances: z.array(LegalAcceptance),
    events: z.object({
      truncated: z.boolean().describe('True when older events were left out (at most 10,000, the newest).'),
      items: z.array(EventEntry).describe('Newest first.'),
    }),
  })
  .meta({ id: 'AccountExport', description: 'Everything Gatehouse holds about one person (docs/account/data-export.md), never a hash or secret.' });

export type AccountExportDocument = z.output<typeof AccountExport>;
