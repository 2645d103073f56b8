import { z } from 'zod';
import type { FastifyRequest } from 'fastify';
import { consoleLocaleOf, translatedErrorText } from '../plugins/views.js';

/**
 * Console forms are the developer API's bodies in form clothes: each form is turned into the API's
 * input and checked by the API's own zod schema, so the rules live in one place. Problems come back
 * per field (the form input's name) for the page to show at the field.
 */

/** A posted body: form fields are strings or repeated strings; anything else (a JSON body) counts as absent. */
export type FormBody = Record<string, unknown>;
export type FieldErrors = Record<string, string>;

/** A single text field ('' when absent; the first when repeated). */
export const field = (body: FormBody, name: string): string => {
  const value = body[name];
  const first = Array.isArray(value) ? value[0] : value;
  return typeof first === 'string' ? first : '';
};

/** Repeated fields (checkboxes of one name). */
export const fields = (body: FormBody, name: string): string[] =>
  [body[name]].flat().filter((value): value is string => typeof value === 'string');

/** A textarea with one entry a line (blank lines ignored). */
export const lines = (body: FormBody, name: string): string[] =>
  field(body, name)
    .split(/\r?\n/)
    .map((line) => line.trim())
    .filter((line) => line !== '');

/** The app form as the API's create/update body: features and required fields are checkboxes. */
export function appInput(body: FormBody) {
  const features = fields(body, 'features');
  return {
    name: field(body, 'name'),
    redirect_uris: lines(body, 'redirect_uris'),
    allowed_origins: lines(body, 'allowed_origins'),
    features: { auth: features.includes('auth'), profile: features.includes('profile') },
    required_fields: fields(body, 'required_fields'),
    mfa: field(body, 'mfa') || 'optional',
    // An emptied branding field removes it (the API's null).
    logo_url: field(body, 'logo_url') || null,
    logo_url_dark: field(body, 'logo_url_dark') || null,
    default_locale: field(body, 'default_locale') || null,
    accent_color: field(body, 'accent_color') || null,
  };
}

/** A number field as the API's number: digits become a number, anything else stays text for the schema to refuse. */
const numberOf = (value: string): number | string => (/^-?\d{1,9}$/.test(value.trim()) ? Number(value.trim()) : value);

/**
 * The settings form's fields beyond `appInput` (save only): back-channel logout, DPoP, PAR, the device flow, the APIs and
 * client credentials, and the password policy, in the API's shape; an empty maximum age means none (the API's null).
 */
export function appSettingsInput(body: FormBody) {
  const maxAge = field(body, 'password_max_age_days').trim();
  // A policy field the post lacks stays as it is (the API's partial policy).
  const policyField = (name: string) => (name in body ? numberOf(field(body, name)) : undefined);
  return {
    backchannel_logout_uri: field(body, 'backchannel_logout_uri').trim() || null,
    backchannel_logout_session_required: field(body, 'backchannel_logout_session_required') === 'on',
    dpop_bound_access_tokens: field(body, 'dpop_bound_access_tokens') === 'on',
    require_pushed_authorization_requests: field(body, 'require_pushed_authorization_requests') === 'on',
    device_authorization_grant: field(body, 'device_authorization_grant') === 'on',
    resource_uris: lines(body, 'resource_uris'),
    client_credentials: field(body, 'client_credentials') === 'on',
    client_credentials_scopes: field(body, 'client_credentials_scopes').split(/\s+/).filter(Boolean),
    password_policy: {
      min_length: policyField('password_min_length'),
      character_classes: policyField('password_character_classes'),
      max_age_days: !('password_max_age_days' in body) ? undefined : maxAge === '' ? null : numberOf(maxAge),
      history_count: policyField('password_history_count'),
    },
  };
}

/** zod's own messages in Simplified Chinese (the rules' own messages are translated by their text). */
const ZH_CN_ISSUES = z.locales.zhCN().localeError;

/**
 * Parses `input` with the API's schema; on failure, one message per form field (list entries name
 * their line), in the page's language. `fieldOf` maps a nested API path to the form field's name.
 */
export function check<S extends z.ZodType>(
  schema: S,
  input: unknown,
  request: FastifyRequest,
  fieldOf: (path: PropertyKey[]) => PropertyKey[] = (path) => path,
): { ok: true; value: z.output<S> } | { ok: false; errors: FieldErrors } {
  const locale = consoleLocaleOf(request);
  const t = request.server.messages.translator(locale);
  const result = schema.safeParse(input, locale === 'zh-CN' ? { error: ZH_CN_ISSUES } : undefined);
  if (result.success) return { ok: true, value: result.data };
  const errors: FieldErrors = {};
  for (const issue of result.error.issues) {
    const [name, index] = fieldOf(issue.path);
    const key = typeof name === 'string' ? name : 'form';
    const text = translatedErrorText(t, issue.message);
    const message = typeof index === 'number' ? t('console.error.line', { n: index + 1, message: text }) : text;
    errors[key] = errors[key] ? `${errors[key]}; ${message}` : message;
  }
  return { ok: false, errors };
}


/** What a console page shows once after the form that made it redirected (a secret, its notice). */
export interface ShownOnce {
  notice?: string;
  secret?: string;
  created?: { name: string; key: string };
  developer?: { email: string; api_key: string };
  invitation?: { url: string; expires_at: string };
}
