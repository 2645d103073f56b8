import { expect } from 'vitest';

/**
 * docs/security/checklist.md#logging-and-errors: no password, token or code in any log line. A secret counts as leaked where it
 * stands whole — not inside a longer run of letters and digits, nor right after a decimal point: a
 * 6-digit code also turns up by chance inside millisecond timestamps and response times, which made a
 * plain substring check fail at random.
 */
export function expectNoSecretsInLogs(lines: readonly string[], secrets: readonly string[], shown = 4): void {
  const text = lines.join('\n');
  for (const secret of secrets) {
    const whole = new RegExp(`(?<![A-Za-z0-9.])${secret.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}(?![A-Za-z0-9])`);
    expect(whole.test(text), `secret leaked to logs: ${secret.slice(0, shown)}…`).toBe(false);
  }
}
