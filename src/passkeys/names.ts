/** The longest name a user may give a passkey (in code points). */
export const PASSKEY_NAME_MAX = 64;

/**
 * A passkey name as stored: NFC, trimmed, 1–64 code points, no control characters (names are shown
 * in pages and events). Null when the input cannot be one.
 */
export function passkeyName(input: string): string | null {
  const name = input.normalize('NFC').trim();
  const length = [...name].length;
  if (length === 0 || length > PASSKEY_NAME_MAX) return null;
  if (/[\p{Cc}\p{Cf}\u2028\u2029]/u.test(name)) return null;
  return name;
}
