import type { Kysely } from 'kysely';
import { AppError } from '../errors.js';
import { safeEqual } from '../shared/ids.js';
import { type OneTimeTokenRow, recordOneTimeTokenFailure } from '../storage/repos/one-time-tokens.js';
import type { Database } from '../storage/schema.js';

export interface CodeCheck {
  now: number;
  /** Wrong answers a code allows (CODE_MAX_ATTEMPTS); the last one voids it. */
  maxAttempts: number;
  /** The keyed hash the code was stored under. */
  codeHash: (id: string, code: string) => string;
  /** Takes a slot of the address's daily budget of wrong codes (Accounts.reserveCodeTry); returns its release. */
  reserveTry: (row: OneTimeTokenRow) => Promise<() => Promise<void>>;
}

/**
 * A six-digit code typed against a mailed one-time token (docs/security/checklist.md#brute-force-and-rate-limits),
 * for every door that mails codes: none live → `code_expired`; a slot of the daily budget is taken before
 * the comparison; a wrong code counts an attempt on the token (`invalid_code` with `attempts_left`) and
 * keeps its slot; anything else gives the slot back. Returns the token; consuming it is the caller's.
 */
export async function checkOneTimeCode(db: Kysely<Database>, row: OneTimeTokenRow | undefined, code: string, check: CodeCheck): Promise<OneTimeTokenRow> {
  if (!row || !row.code_hash || row.attempts >= check.maxAttempts) throw new AppError('code_expired', { detail: 'no live code' });
  const release = await check.reserveTry(row);
  if (!/^\d{6}$/.test(code) || !safeEqual(check.codeHash(row.id, code), row.code_hash)) {
    const attempts = await recordOneTimeTokenFailure(db, row.id, check.now, check.maxAttempts);
    if (attempts === null) {
      await release();
      throw new AppError('code_expired', { detail: 'code voided meanwhile' });
    }
    throw new AppError('invalid_code', { extra: { attempts_left: Math.max(0, check.maxAttempts - attempts) }, detail: 'wrong code' });
  }
  await release();
  return row;
}
