import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import { isIP } from 'node:net';
import { publicOnlyLookup, TargetRefused, urlProblem, isPublicAddress, type TargetPolicy } from './targets.js';

/**
 * One outgoing POST to an address a developer registered — a webhook (docs/webhooks.md) or a
 * back-channel logout token (docs/guides/back-channel-logout.md): only where the target policy allows,
 * no redirect followed (a 3xx is a failed attempt), at most RESPONSE_LIMIT bytes of the answer read,
 * and the whole exchange cut off after TIMEOUT_MS.
 */

export const TIMEOUT_MS = 10_000;
const RESPONSE_LIMIT = 4096;
/** What the delivery log keeps of a response body. */
export const EXCERPT_LENGTH = 300;

export interface Attempt {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Default `application/json` (a webhook). */
  contentType?: string;
  /** Default `Gatehouse-Webhooks/1`. */
  userAgent?: string;
}

export interface AttemptResult {
  ok: boolean;
  statusCode: number | null;
  /** Why it failed, for the log (never a secret: no header is quoted). */
  error: string | null;
  /** The start of the response body. */
  excerpt: string | null;
}

export function send(attempt: Attempt, policy: TargetPolicy, timeoutMs = TIMEOUT_MS): Promise<AttemptResult> {
  const problem = urlProblem(attempt.url, policy);
  if (problem) return Promise.resolve({ ok: false, statusCode: null, error: `refused: URL ${problem}`, excerpt: null });
  const url = new URL(attempt.url);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (policy.publicOnly && isIP(host) && !isPublicAddress(host)) return Promise.resolve({ ok: false, statusCode: null, error: 'refused: not a public address', excerpt: null });
  const request = url.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise((resolve) => {
    let settled = false;
    const finish = (result: AttemptResult) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(result);
    };
    const req = request(
      url,
      {
        method: 'POST',
        headers: {
          ...attempt.headers,
          'content-type': attempt.contentType ?? 'application/json',
          'content-length': String(Buffer.byteLength(attempt.body)),
          'user-agent': attempt.userAgent ?? 'Gatehouse-Webhooks/1',
        },
        // A fresh connection per attempt, checked when it is made (no pooled socket to another address).
        agent: false,
        ...(policy.publicOnly ? { lookup: publicOnlyLookup } : {}),
      },
      (res: IncomingMessage) => {
        const chunks: Buffer[] = [];
        let length = 0;
        const done = () => {
          const excerpt = Buffer.concat(chunks).toString('utf8').slice(0, EXCERPT_LENGTH);
          const status = res.statusCode ?? 0;
          const ok = status >= 200 && status < 300;
          finish({ ok, statusCode: status, error: ok ? null : status >= 300 && status < 400 ? `redirect (${status}) not followed` : `HTTP ${status}`, excerpt: excerpt || null });
        };
        res.on('data', (chunk: Buffer) => {
          if (length >= RESPONSE_LIMIT) return;
          chunks.push(chunk.subarray(0, RESPONSE_LIMIT - length));
          length += chunk.length;
          if (length >= RESPONSE_LIMIT) {
            done();
            res.destroy();
          }
        });
        res.on('end', done);
        res.on('error', done);
        res.on('close', done);
      },
    );
    const timer = setTimeout(() => {
      finish({ ok: false, statusCode: null, error: `timed out after ${timeoutMs / 1000} s`, excerpt: null });
      req.destroy();
    }, timeoutMs);
    timer.unref();
    req.on('error', (error) => {
      const refused = error instanceof TargetRefused || (error as { cause?: unknown }).cause instanceof TargetRefused;
      finish({ ok: false, statusCode: null, error: refused ? `refused: ${error.message}` : `connection failed: ${(error as NodeJS.ErrnoException).code ?? error.message}`, excerpt: null });
    });
    req.end(attempt.body);
  });
}
