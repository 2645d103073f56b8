import { isValidDisplayName } from '../shared/user-fields.js';

/**
 * The one rule for the profile data a user supplies (name, phone number, date of birth), wherever it
 * comes in: `/v1/auth/profile/complete`, the hosted `/profile` step, `/continue` and `/account`.
 * Pure: the caller says which fields this door accepts and passes the clock's time.
 */

export const PROFILE_FIELDS = ['name', 'phone_number', 'birthdate'] as const;
export type ProfileField = (typeof PROFILE_FIELDS)[number];

/** The values to store; `null` clears a field (only where the door allows clearing). */
export type ProfilePatch = Partial<Record<ProfileField, string | null>>;

export interface ProfileProblem {
  field: ProfileField;
  reason: 'invalid' | 'not_requested' | 'required';
}

/** E.164 (ITU-T): a plus sign and 7–15 digits, no leading zero. */
const E164 = /^\+[1-9]\d{6,14}$/;

export function isValidBirthdate(value: string, nowSeconds: number): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(value) && date.getTime() <= nowSeconds * 1000 && date.getUTCFullYear() >= 1900;
}

/** The form a value is stored in: names trimmed, phone numbers without the spaces, dots, dashes and brackets people type. */
export function normalizeProfileValue(field: ProfileField, value: string): string {
  return field === 'phone_number' ? value.replace(/[\s().-]/g, '') : value.trim();
}

export function isValidProfileValue(field: ProfileField, value: string, nowSeconds: number): boolean {
  if (field === 'name') return isValidDisplayName(value);
  if (field === 'phone_number') return E164.test(value);
  return isValidBirthdate(value, nowSeconds);
}

export type ProfileDataResult = { ok: true; patch: ProfilePatch } | { ok: false; problems: ProfileProblem[] };

/**
 * Checks supplied profile data against the fields a door accepts.
 * - `accepted`: the only fields that may be written (e.g. the app's missing required fields);
 *   a supplied field outside it is a problem, never silently dropped or written;
 * - `required`: fields that must be supplied (the step's form); `allowClear`: an empty value clears
 *   the field (the account page) instead of being invalid;
 * - `current`: the stored values, so restating one outside `accepted` is a no-op rather than an error.
 */
export function parseProfileData(
  input: Partial<Record<ProfileField, string | undefined>>,
  rules: {
    accepted: readonly ProfileField[];
    required?: readonly ProfileField[];
    allowClear?: boolean;
    now: number;
    /** The stored values: a field outside `accepted` that restates its stored value is ignored, not refused. */
    current?: Partial<Record<ProfileField, string | null>>;
  },
): ProfileDataResult {
  const patch: ProfilePatch = {};
  const problems: ProfileProblem[] = [];
  for (const field of PROFILE_FIELDS) {
    const raw = input[field];
    if (raw === undefined) {
      if (rules.required?.includes(field)) problems.push({ field, reason: 'required' });
      continue;
    }
    const value = normalizeProfileValue(field, raw);
    if (!rules.accepted.includes(field)) {
      // Restating what is already stored changes nothing (a retried or concurrent request); anything else is refused.
      if (rules.current?.[field] !== value) problems.push({ field, reason: 'not_requested' });
      continue;
    }
    if (value === '' && rules.allowClear) patch[field] = null;
    else if (isValidProfileValue(field, value, rules.now)) patch[field] = value;
    else problems.push({ field, reason: value === '' && rules.required?.includes(field) ? 'required' : 'invalid' });
  }
  return problems.length ? { ok: false, problems } : { ok: true, patch };
}
