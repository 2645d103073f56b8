import { z } from 'zod';
import { LOCALES } from '../plugins/i18n.js';
import { isValidOrigin } from '../shared/cors.js';
import { isValidEmailAddress } from '../shared/user-fields.js';
import { PASSWORD_HISTORY_MAX, PASSWORD_MAX, PASSWORD_MAX_AGE_DAYS_MAX, PASSWORD_MIN } from '../sign-in/password-policy.js';
import { validateRedirectUris } from './redirect-uris.js';
import { MAX_RESOURCES, resourceUriProblem } from '../shared/resources.js';
import { SUPPORTED_SCOPES as USER_SCOPES } from '../shared/scopes.js';

/** Request schemas of the developer API (docs/reference/rest-api.md#developers). Unknown keys are refused, so typos surface as 400. */

const MAX_ALLOWED_ORIGINS = 20;
const MAX_LOGO_URL = 2048;

const AppName = z.string().trim().min(1).max(100);

/** Redirect-URI rules run inside the schema, so a bad entry is a 400 `invalid_request` naming its index. */
const RedirectUris = z.array(z.string()).superRefine((uris, ctx) => {
  const result = validateRedirectUris(uris);
  if (result.ok) return;
  for (const problem of result.problems) ctx.addIssue({ code: 'custom', message: problem.message, path: problem.index === null ? [] : [problem.index] });
});

const AllowedOrigins = z
  .array(z.string().refine(isValidOrigin, 'must be an exact origin (scheme://host[:port]); http only for loopback hosts'))
  .max(MAX_ALLOWED_ORIGINS)
  .refine((origins) => new Set(origins).size === origins.length, 'must not contain duplicates');

const RequiredFields = z
  .array(z.enum(['name', 'phone_number', 'birthdate', 'email_verified']))
  .refine((fields) => new Set(fields).size === fields.length, 'must not contain duplicates');

const MfaPolicy = z
  .enum(['off', 'optional', 'required'])
  .describe('Second factor: `required` makes every user sign in with two factors (enrolling one if needed); with `optional` (default) and `off`, users who enrolled a factor are asked for it.');

/** Where the hosted pages load an app's logo from: https only (no mixed content), no credentials in it. */
const LogoUrl = z
  .string()
  .trim()
  .max(MAX_LOGO_URL)
  .refine((value) => {
    const url = URL.canParse(value) ? new URL(value) : undefined;
    return url !== undefined && url.protocol === 'https:' && url.hostname !== '' && url.username === '' && url.password === '';
  }, 'must be an https URL without credentials')
  .describe('An https URL of the logo the hosted sign-in pages show for this app (at most 2048 characters); null removes it.');

const AccentColor = z
  .string()
  .regex(/^#[0-9a-fA-F]{6}$/, 'must be a colour in the form #rrggbb')
  .transform((value) => value.toLowerCase())
  .describe("The hosted pages' button colour for this app, `#rrggbb` (the text on it is chosen to keep WCAG AA contrast); null restores the default.");

const DpopBound = z
  .boolean()
  .describe('true: every token request and sign-in of this app must carry a DPoP proof (RFC 9449), so its access tokens are always sender-constrained (docs/reference/oauth.md).');
const RequirePar = z
  .boolean()
  .describe('true: `/oauth/authorize` accepts only a `request_uri` from `POST /oauth/par` (RFC 9126) for this app.');

const DeviceGrant = z
  .boolean()
  .describe('true: the app may use the device authorization grant (RFC 8628): `POST /oauth/device_authorization`, the `/device` page and `grant_type=urn:ietf:params:oauth:grant-type:device_code` (docs/reference/oauth.md#device-authorization-grant-rfc-8628).');
const ResourceUris = z
  .array(z.string().superRefine((value, ctx) => {
    const problem = resourceUriProblem(value, false);
    if (problem) ctx.addIssue({ code: 'custom', message: problem });
  }))
  .max(MAX_RESOURCES)
  .refine((uris) => new Set(uris).size === uris.length, 'must not contain duplicates')
  .describe(`The APIs (RFC 8707 resource URIs: absolute, no fragment, https in production; at most ${MAX_RESOURCES}) this app may ask access tokens for with \`resource\` (docs/reference/oauth.md#resource-indicators-rfc-8707).`);
const ClientCredentials = z
  .boolean()
  .describe('true: this confidential app may use `grant_type=client_credentials` for tokens of its own, with no user (docs/reference/oauth.md#client-credentials).');
const ClientCredentialsScopes = z
  .array(z.string().regex(/^[\x21\x23-\x5b\x5d-\x7e]{1,64}$/, 'must be a scope token (RFC 6749 §3.3), at most 64 characters').refine((scope) => !(USER_SCOPES as readonly string[]).includes(scope), 'names a user, which a client-credentials token has not'))
  .max(MAX_RESOURCES)
  .refine((scopes) => new Set(scopes).size === scopes.length, 'must not contain duplicates')
  .describe('The scopes a client-credentials token of this app may carry (your APIs define them); not openid, profile, email or offline_access.');

const Features = z.strictObject({ auth: z.boolean(), profile: z.boolean() });

/** The app's default language: one of the hosted pages' locales (docs/guides/hosted-pages.md). */
const DefaultLocale = z.enum(LOCALES).describe('One of the hosted pages\' locales: ' + LOCALES.join(', ') + '.');
/**
 * OpenID Connect Back-Channel Logout URI (docs/guides/back-channel-logout.md): an absolute URL without a
 * fragment; where it may point (https and a public address in production) is checked with the webhooks'
 * target policy by the routes (`backchannelUriProblem`), which depends on the deployment.
 */
const BackchannelLogoutUri = z.string().max(2000).describe('https URL (in production: a public address) that receives logout tokens.');
/** docs/guides/password-policy.md */
const PasswordPolicyFields = {
  min_length: z.number().int().min(PASSWORD_MIN).max(PASSWORD_MAX).describe(`Minimum length in characters (${PASSWORD_MIN}–${PASSWORD_MAX}); the platform floor PASSWORD_MIN_LENGTH applies when higher.`),
  character_classes: z
    .number()
    .int()
    .min(0)
    .max(4)
    .describe('How many of lower-case letters, upper-case letters, digits and other characters a password must mix; 0 (default) = no composition rule (NIST SP 800-63B).'),
  max_age_days: z.number().int().min(1).max(PASSWORD_MAX_AGE_DAYS_MAX).nullable().describe('Days a password is good for; then a sign-in must choose a new one. null (default) = no maximum age.'),
  history_count: z.number().int().min(0).max(PASSWORD_HISTORY_MAX).describe(`How many previous passwords may not be chosen again (0–${PASSWORD_HISTORY_MAX}); 0 (default) = off.`),
};
const PasswordPolicy = z.strictObject(PasswordPolicyFields);
const PASSWORD_POLICY_DEFAULT = { min_length: PASSWORD_MIN, character_classes: 0, max_age_days: null, history_count: 0 };

/** The mails whose subject and intro an app may override (views/emails/<kind>.*.eta). */
export const MAIL_KINDS = [
  'verify_code',
  'magic_link',
  'password_reset',
  'password_changed',
  'email_change_code',
  'email_changed',
  'email_change_taken',
  'account_deletion_scheduled',
] as const;
export const MAIL_SUBJECT_MAX = 150;
export const MAIL_INTRO_MAX = 600;

/** Plain text on one line: no control characters, so an override can neither add headers nor break the layout. */
const OverrideText = (max: number) =>
  z
    .string()
    .trim()
    .min(1)
    .max(max)
    .refine((value) => !/\p{Cc}/u.test(value), 'must be one line without control characters');

const MailTextOverride = z
  .strictObject({ subject: OverrideText(MAIL_SUBJECT_MAX).optional(), intro: OverrideText(MAIL_INTRO_MAX).optional() })
  .refine((value) => value.subject !== undefined || value.intro !== undefined, 'must set subject, intro or both');

const MailOverrides = z
  .partialRecord(z.enum(MAIL_KINDS), z.partialRecord(z.enum(LOCALES), MailTextOverride))
  .describe(
    `Per mail kind, then per locale: a subject (at most ${MAIL_SUBJECT_MAX} characters) and/or an intro line (at most ${MAIL_INTRO_MAX}) that replace the standard ones. Plain text; links and codes stay in the mail whatever the override says.`,
  );

/** A Reply-To address: one plain address, no display name, no line breaks. */
const ReplyTo = z
  .string()
  .trim()
  .max(254)
  .refine((value) => isValidEmailAddress(value.toLowerCase()) && !/[\s<>,;"]/.test(value), 'must be one email address')
  .describe('The Reply-To address of every mail this app causes; null = none (replies go nowhere).');

const MailSettings = z.strictObject({ reply_to: ReplyTo.nullable(), overrides: MailOverrides });

export const CreateAppBody = z.strictObject({
  name: AppName,
  redirect_uris: RedirectUris,
  type: z.enum(['public', 'confidential']),
  features: Features.default({ auth: true, profile: false }),
  required_fields: RequiredFields.default([]),
  allowed_origins: AllowedOrigins.default([]),
  mfa: MfaPolicy.default('optional'),
  logo_url: LogoUrl.nullable().default(null),
  logo_url_dark: LogoUrl.nullable().default(null),
  accent_color: AccentColor.nullable().default(null),
  default_locale: DefaultLocale.nullable().default(null),
  dpop_bound_access_tokens: DpopBound.default(false),
  backchannel_logout_uri: BackchannelLogoutUri.nullable().default(null),
  backchannel_logout_session_required: z.boolean().default(false),
  password_policy: PasswordPolicy.default(PASSWORD_POLICY_DEFAULT),
  mail: MailSettings.default({ reply_to: null, overrides: {} }),
  require_pushed_authorization_requests: RequirePar.default(false),
  device_authorization_grant: DeviceGrant.default(false),
  resource_uris: ResourceUris.default([]),
  client_credentials: ClientCredentials.default(false),
  client_credentials_scopes: ClientCredentialsScopes.default([]),
});
export type CreateAppInput = z.output<typeof CreateAppBody>;

/** `type` is fixed at creation: a public app has no secret to rotate into. */
export const UpdateAppBody = z.strictObject({
  name: AppName.optional(),
  redirect_uris: RedirectUris.optional(),
  features: Features.partial().optional(),
  required_fields: RequiredFields.optional(),
  allowed_origins: AllowedOrigins.optional(),
  mfa: MfaPolicy.optional(),
  logo_url: LogoUrl.nullable().optional(),
  logo_url_dark: LogoUrl.nullable().optional(),
  accent_color: AccentColor.nullable().optional(),
  default_locale: DefaultLocale.nullable().optional(),
  dpop_bound_access_tokens: DpopBound.optional(),
  backchannel_logout_uri: BackchannelLogoutUri.nullable().optional(),
  backchannel_logout_session_required: z.boolean().optional(),
  password_policy: PasswordPolicy.partial().optional().describe('The fields sent replace those of the policy; the others stay.'),
  mail: MailSettings.partial().optional().describe('`reply_to` and/or `overrides` (the whole set of overrides) replace the current ones.'),
  require_pushed_authorization_requests: RequirePar.optional(),
  device_authorization_grant: DeviceGrant.optional(),
  resource_uris: ResourceUris.optional(),
  client_credentials: ClientCredentials.optional(),
  client_credentials_scopes: ClientCredentialsScopes.optional(),
  disabled: z.boolean().optional(),
});
export type UpdateAppInput = z.output<typeof UpdateAppBody>;

export const AppParams = z.object({ id: z.string().min(1).max(200) });

export const AppView = z
  .object({
    id: z.string().describe('The app id, which is its client_id.'),
    client_id: z.string(),
    name: z.string(),
    type: z.enum(['public', 'confidential']),
    redirect_uris: z.array(z.string()),
    allowed_origins: z.array(z.string()),
    features: z.object({ auth: z.boolean(), profile: z.boolean() }),
    required_fields: z.array(z.enum(['name', 'phone_number', 'birthdate', 'email_verified'])),
    mfa: z.enum(['off', 'optional', 'required']),
    logo_url: z.string().nullable().describe('Hosted-page logo (https URL), or null.'),
    logo_url_dark: z.string().nullable().describe('The logo for the dark colour scheme (https URL), or null for `logo_url` in both.'),
    accent_color: z.string().nullable().describe('Hosted-page accent colour `#rrggbb`, or null.'),
    default_locale: z.enum(LOCALES).nullable().describe('The hosted pages\' and mails\' language when neither `ui_locales`, the person\'s own choice nor Accept-Language picks one; null for English.'),
    dpop_bound_access_tokens: DpopBound,
    backchannel_logout_uri: z.string().nullable().describe('Where OpenID Connect Back-Channel Logout tokens are POSTed (docs/guides/back-channel-logout.md), or null for none.'),
    backchannel_logout_session_required: z.boolean().describe('Whether the app needs `sid` in logout tokens.'),
    password_policy: z.object({ min_length: z.number(), character_classes: z.number(), max_age_days: z.number().nullable(), history_count: z.number() }).describe('The password policy of people signing in to this app (docs/guides/password-policy.md).'),
    mail: z
      .object({ reply_to: z.string().nullable(), overrides: z.record(z.string(), z.record(z.string(), z.object({ subject: z.string().optional(), intro: z.string().optional() }))) })
      .describe('Reply-To and text overrides of the mails this app causes (docs/guides/app-mail.md).'),
    require_pushed_authorization_requests: RequirePar,
    device_authorization_grant: DeviceGrant,
    resource_uris: z.array(z.string()).describe('The APIs this app may ask access tokens for (RFC 8707).'),
    client_credentials: ClientCredentials,
    client_credentials_scopes: z.array(z.string()).describe('The scopes a client-credentials token of this app may carry.'),
    disabled: z.boolean(),
    created_at: z.string(),
    updated_at: z.string(),
    client_secret: z.string().optional().describe('Only in the answer that created or rotated it.'),
  })
  .meta({ id: 'App', description: 'An app (OAuth client) as its developer sees it (docs/reference/rest-api.md#developers).' });

export const AppList = z.object({ items: z.array(AppView) });

/** Listings take only the parameters they name: anything else is a 400, as on every listing. */
export const NoQuery = z.strictObject({});
