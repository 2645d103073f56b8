import { createHash } from 'node:crypto';

/**
 * The Have I Been Pwned k-anonymity range client (docs/guides/password-policy.md, "HIBP_RANGE_URL"):
 * only the first five hex characters of the password's SHA-1 leave the server; the answer lists the
 * suffixes of every leaked password under that prefix, and the match is made here. Best effort: a
 * timeout, an outage or a malformed answer is `unknown`, and a sign-up is never refused for it.
 */

export type RangeVerdict = 'breached' | 'clear' | 'unknown';

export interface RangeCheck {
  (password: string): Promise<RangeVerdict>;
}

export interface RangeClientOptions {
  /** The range endpoint; the prefix is appended (`{url}/{prefix}`). */
  url: string;
  timeoutMs: number;
  /** Told about failures (never the password or its hash). */
  onFailure: (reason: string) => void;
}

export function hibpRangeClient(options: RangeClientOptions): RangeCheck {
  const base = options.url.replace(/\/+$/, '');
  return async (password) => {
    const sha1 = createHash('sha1').update(password.normalize('NFC'), 'utf8').digest('hex').toUpperCase();
    const prefix = sha1.slice(0, 5);
    const suffix = sha1.slice(5);
    try {
      const response = await fetch(`${base}/${prefix}`, { signal: AbortSignal.timeout(options.timeoutMs), headers: { 'add-padding': 'true' } });
      if (!response.ok) {
        await response.body?.cancel();
        options.onFailure(`status ${response.status}`);
        return 'unknown';
      }
      const body = await response.text();
      for (const line of body.split('\n')) {
        const [candidate, count] = line.trim().split(':');
        // Padding entries (add-padding) carry a count of 0: they are not leaked passwords.
        if (candidate?.toUpperCase() === suffix && Number(count) > 0) return 'breached';
      }
      return 'clear';
    } catch (error) {
      options.onFailure(error instanceof Error && error.name === 'TimeoutError' ? 'timeout' : 'unreachable');
      return 'unknown';
    }
  };
}
