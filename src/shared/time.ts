/** Seconds since the epoch: the unit every stored time uses (portable across SQLite and PostgreSQL). */
export const epochSeconds = (ms: number = Date.now()): number => Math.floor(ms / 1000);

/** RFC 3339 UTC string for a stored epoch-seconds value (docs/reference/tokens.md#identifiers). */
export const isoTime = (seconds: number): string => new Date(seconds * 1000).toISOString();

export interface Clock {
  /** Current time in epoch seconds. */
  now(): number;
}

export const systemClock: Clock = { now: () => epochSeconds() };
