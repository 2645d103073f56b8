import type { FastifyReply, FastifyRequest } from 'fastify';
import type { ErrorCode } from '../errors.js';
import { logRefusal, toAppError } from '../plugins/error-handler.js';
import type { Translate } from '../plugins/i18n.js';
import { localeOf, translatedErrorText } from '../plugins/views.js';
import { PASSWORD_MAX, PASSWORD_MIN, type PasswordProblem } from '../sign-in/password-policy.js';
import type { PasswordRules } from './password-rules.js';

/** Every `reason` of a weak_password refusal, each with its own message (`password.refused.<reason>`). */
const REFUSAL_REASONS: ReadonlySet<string> = new Set<PasswordProblem>(['too_short', 'too_long', 'equals_email', 'character_classes', 'common', 'reused']);

/**
 * What a hosted form shows after a refused submission, rendered by `views/partials/field.eta` (the
 * message next to its field, `aria-invalid`, `aria-describedby`, `autofocus` on the first invalid
 * field) and `views/partials/form-error.eta` (a message about the whole form, with ways on).
 * Every hosted form builds it with `formState` (its own checks) or `formFailure` (a refused call).
 */
export interface FormState {
  /** A message about the whole form (wrong credentials, lockout, expired link…). */
  message?: string;
  /** Field name → the message shown next to that field. */
  fields: Record<string, string>;
  /** The field that gets `autofocus`: the first invalid one, else the one to retry. */
  focus?: string;
  /** Ways on offered with the form-level message (e.g. a magic link or a reset while locked). */
  help?: Array<{ href: string; label: string }>;
}

export function formState(parts: { message?: string; fields?: Record<string, string | undefined>; focus?: string; help?: FormState['help'] }): FormState {
  const fields: Record<string, string> = {};
  for (const [name, message] of Object.entries(parts.fields ?? {})) if (message) fields[name] = message;
  return { message: parts.message, fields, focus: Object.keys(fields)[0] ?? parts.focus, help: parts.message ? parts.help : undefined };
}

export interface FailureOptions {
  /** The refusals this form explains; anything else is rethrown (and becomes the error page). */
  codes: readonly ErrorCode[];
  /** The field a refusal concerns: its message goes next to that field instead of above the form. */
  fieldOf?: Partial<Record<ErrorCode, string>>;
  /** Message keys replacing the default `form.error.<code>`. */
  keys?: Partial<Record<ErrorCode, string>>;
  /** The field to focus with a form-level message (where the user retries). */
  focus?: string;
  /** Ways on offered while the user is locked out or throttled (`rate_limited`). */
  help?: FormState['help'];
  /** Overrides the status of the answer (e.g. 403 for a failed re-authentication). */
  status?: number;
  /** The password rules the page showed: a `weak_password` refusal then names the rule that failed (docs/guides/password-policy.md). */
  passwordRules?: PasswordRules;
}

/** "3 minutes" / "1 minute" / "40 seconds" / "1 second" in the page's language. */
function waitText(t: Translate, seconds: number): string {
  if (seconds <= 1) return t('form.wait.second');
  if (seconds < 60) return t('form.wait.seconds', { n: Math.ceil(seconds) });
  const minutes = Math.ceil(seconds / 60);
  return minutes === 1 ? t('form.wait.minute') : t('form.wait.minutes', { n: minutes });
}

/**
 * Translates a refused service call for a hosted form, sets the answer's status (and `Retry-After`),
 * and returns what the form shows. Profile data refused field by field (`invalid_request` with
 * `details`, see SignIn.applyProfileData) puts each message next to its field.
 */
export function formFailure(request: FastifyRequest, reply: FastifyReply, thrown: unknown, options: FailureOptions): FormState {
  const error = toAppError(thrown);
  // A server that cannot answer right now (password checks overloaded, the database unreachable) keeps
  // every form and what was typed in it, and says when to try again.
  const busy = error.code === 'service_unavailable' && error.status === 503;
  if (!busy && !options.codes.includes(error.code)) throw thrown;
  logRefusal(request, error);
  reply.code(options.status ?? error.status);
  if (error.headers) reply.headers(error.headers);
  const t = request.server.messages.translator(localeOf(request));
  if (error.code === 'invalid_request' && error.details?.length) {
    return formState({ fields: Object.fromEntries(error.details.map((d) => [d.path, t(`form.error.invalid_${d.path}`)])) });
  }
  const retryAfter = typeof error.extra?.retry_after === 'number' ? error.extra.retry_after : Number(error.headers?.['retry-after']) || undefined;
  if (error.code === 'rate_limited' && retryAfter !== undefined) reply.header('retry-after', String(retryAfter));
  const reason = error.code === 'weak_password' && options.passwordRules ? error.extra?.reason : undefined;
  const key = typeof reason === 'string' && REFUSAL_REASONS.has(reason) ? `password.refused.${reason}` : (options.keys?.[error.code] ?? `form.error.${error.code}`);
  const translated = t(key, {
    wait: waitText(t, retryAfter ?? 60),
    attempts: Number(error.extra?.attempts_left ?? 0),
    reason: error.details?.[0]?.message ?? '',
    min: options.passwordRules?.min ?? PASSWORD_MIN,
    classes: options.passwordRules?.classes ?? 0,
    max: PASSWORD_MAX,
  });
  // A refusal with its own message (e.g. "This sign-in has expired") and no catalogue entry keeps it.
  const message = translated === key ? translatedErrorText(t, error.publicMessage) : translated;
  const field = options.fieldOf?.[error.code];
  if (field) return formState({ fields: { [field]: message } });
  return formState({ message, focus: options.focus, help: error.code === 'rate_limited' ? options.help : undefined });
}

/** The ways on a locked-out or throttled sign-in form offers: a mailed link, a password reset. */
export function signInHelp(request: FastifyRequest, carried: string): NonNullable<FormState['help']> {
  const t = request.server.messages.translator(localeOf(request));
  return [
    { href: `/magic-link/request${carried}`, label: t('form.help.magic_link') },
    { href: `/password/forgot${carried}`, label: t('form.help.reset') },
  ];
}
