import { z } from 'zod';

/**
 * The one rule for an end user's or developer's email address and display name, wherever they come in
 * (REST bodies, hosted forms, admin API): bounded length and no control characters, so every database
 * stores the same thing (PostgreSQL refuses NUL in text, SQLite would keep it).
 */
const CONTROL_CHARACTER = /[\u0000-\u001f\u007f]/;

export function isValidEmailAddress(value: string): boolean {
  return value.length >= 3 && value.length <= 254 && /^[^\s@]+@[^\s@]+$/.test(value) && !CONTROL_CHARACTER.test(value);
}

export function isValidDisplayName(value: string): boolean {
  const length = [...value].length;
  return length >= 1 && length <= 100 && !CONTROL_CHARACTER.test(value);
}

// The refinements are not JSON Schema; their meta says the same for the OpenAPI document.
export const EmailAddress = z.string().trim().refine(isValidEmailAddress, 'must be an email address').meta({ format: 'email', minLength: 3, maxLength: 254 });
export const DisplayName = z
  .string()
  .trim()
  .refine(isValidDisplayName, 'must be 1–100 characters without control characters')
  .meta({ minLength: 1, maxLength: 100, pattern: '^[^\\u0000-\\u001f\\u007f]*$' });
