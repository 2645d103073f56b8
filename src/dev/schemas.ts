import { z } from 'zod';
import { LOCALES } from '../plugins/i18n.js';
import { isValidOrigin } from '../shared/cors.js';
import { validateRedirectUris } from './redirect-uris.js';

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

const Features = z.strictObject({ auth: z.boolean(), profile: z.boolean() });

/** The app's default language: one of the hosted pages' locales (docs/guides/hosted-pages.md). */
const DefaultLocale = z.enum(LOCALES).describe('One of the hosted pages\' locales: ' + LOCALES.join(', ') + '.');
/**
 * OpenID Connect Back-Channel Logout URI (docs/guides/back-channel-logout.md): an absolute URL without a
 * fragment; where it may point (https and a public address in production) is checked with the webhooks'
 * target policy by the routes (`backchannelUriProblem`), which depends on the deployment.
 */
const BackchannelLogoutUri = z.string().max(2000).describe('https URL (in production: a public address) that receives logout tokens.');

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
    disabled: z.boolean(),
    created_at: z.string(),
    updated_at: z.string(),
    client_secret: z.string().optional().describe('Only in the answer that created or rotated it.'),
  })
  .meta({ id: 'App', description: 'An app (OAuth client) as its developer sees it (docs/reference/rest-api.md#developers).' });

export const AppList = z.object({ items: z.array(AppView) });

/** Listings take only the parameters they name: anything else is a 400, as on every listing. */
export const NoQuery = z.strictObject({});
