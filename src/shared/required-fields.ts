import type { RequiredField } from '../storage/repos/apps.js';
import type { UserRow } from '../storage/schema.js';

/** The app's required profile fields the user has not supplied yet (CONTRACT §5), in the app's order. */
export function missingRequiredFields(required: RequiredField[], user: Pick<UserRow, 'name' | 'phone_number' | 'birthdate' | 'email_verified'>): RequiredField[] {
  return required.filter((field) => {
    if (field === 'email_verified') return user.email_verified !== 1;
    const value = user[field];
    return value === null || value === '';
  });
}

/** E.164 phone numbers and calendar dates, as the profile forms and `/v1/auth/profile/complete` accept them. */
export const E164 = /^\+[1-9]\d{6,14}$/;

export function isValidBirthdate(value: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(value)) return false;
  const date = new Date(`${value}T00:00:00Z`);
  return !Number.isNaN(date.getTime()) && date.toISOString().startsWith(value) && date.getTime() <= Date.now() && date.getUTCFullYear() >= 1900;
}
