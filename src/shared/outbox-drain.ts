import { randomInt } from 'node:crypto';
import type { Clock } from './time.js';

/**
 * One delivery pass over a durable outbox of HTTP deliveries (webhooks, docs/webhooks.md; back-channel
 * logout tokens, docs/guides/back-channel-logout.md): due rows are claimed with a lease — so several
 * processes never send one message at once — and attempted once each. Up to `parallel` attempts run at
 * once, at most `perKey` of them to one destination, and a finished one makes room for the next: a
 * destination that answers slowly (or not at all) holds a few slots, never the others' deliveries.
 */

export interface DrainSource<R> {
  /** Candidates due at `now` (rows with a live lease excluded), oldest first. */
  listDue(now: number, limit: number): Promise<R[]>;
  /** Takes the lease of one row until `lockedUntil`; false when another process holds or settled it. */
  claim(row: R, now: number, lockedUntil: number): Promise<boolean>;
  /** One attempt (records its own outcome). */
  attempt(row: R): Promise<void>;
  /** The destination a row goes to (rows sharing it share `perKey`). */
  keyOf(row: R): string;
  /** An attempt that threw instead of recording its outcome. */
  onError(error: unknown, row: R): void;
  /** True once the deliverer is stopping (shutdown): the attempts in hand finish and nothing new is claimed. */
  stopped(): boolean;
}

export interface DrainLimits {
  parallel: number;
  perKey: number;
  /** Longer than an attempt can take, so a lease never runs out under a live attempt. */
  leaseSeconds: number;
}

export async function drainDue<R>(clock: Clock, source: DrainSource<R>, limits: DrainLimits): Promise<void> {
  const inFlight = new Set<Promise<void>>();
  const perKey = new Map<string, number>();
  for (;;) {
    const now = clock.now();
    // Rows claimed here have a lease, so the due list never returns them while they are in flight.
    const due = inFlight.size < limits.parallel && !source.stopped() ? await source.listDue(now, limits.parallel * limits.perKey) : [];
    let started = 0;
    for (const row of due) {
      if (inFlight.size >= limits.parallel) break;
      const key = source.keyOf(row);
      if ((perKey.get(key) ?? 0) >= limits.perKey) continue;
      if (!(await source.claim(row, now, now + limits.leaseSeconds))) continue;
      started++;
      perKey.set(key, (perKey.get(key) ?? 0) + 1);
      const attempt: Promise<void> = source
        .attempt(row)
        .catch((error) => source.onError(error, row))
        .finally(() => {
          inFlight.delete(attempt);
          perKey.set(key, (perKey.get(key) ?? 1) - 1);
        });
      inFlight.add(attempt);
    }
    if (inFlight.size === 0) return;
    // Nothing new could start (all due rows busy or held elsewhere): wait for one attempt to end.
    if (started === 0 || inFlight.size >= limits.parallel) await Promise.race(inFlight);
  }
}

/** Seconds before the next attempt after `attempts` failed ones: 5 s doubling to at most 1 h, ±20 % jitter. */
export function retryDelay(attempts: number): number {
  const base = Math.min(5 * 2 ** Math.max(0, attempts - 1), 3600);
  return Math.max(1, Math.round(base * (0.8 + randomInt(0, 401) / 1000)));
}
