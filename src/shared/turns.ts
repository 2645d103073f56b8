/**
 * Turns at a scarce resource: at most `limit` pieces of work run at once, the others wait in arrival
 * order. When a caller's turn comes, its terms are asked first: if nobody wants the result any more
 * (`abandoned`), or the caller has waited longer than it agreed to (`maxWaitMs`), the work is not
 * started, the turn goes to the next in line, and the call rejects with a TurnSkipped. Under a flood
 * the line then drains at the rate its callers leave or time out, and what it does compute comes out
 * within the bound, instead of computing answers that arrive too late to be read.
 */

/** The work was not started: nothing was computed, so the caller may give back what it reserved. */
export class TurnSkipped extends Error {}

/** Its caller had gone when the turn came. */
export class TurnAbandoned extends TurnSkipped {
  constructor() {
    super('abandoned before its turn: not started');
    this.name = 'TurnAbandoned';
  }
}

/** Its caller had waited longer than its `maxWaitMs` when the turn came: the line is overloaded. */
export class TurnOverdue extends TurnSkipped {
  constructor(
    readonly waitedMs: number,
    readonly maxWaitMs: number,
  ) {
    super(`waited ${Math.round(waitedMs)} ms for its turn, over the ${maxWaitMs} ms bound: not started`);
    this.name = 'TurnOverdue';
  }
}

export interface TurnTerms {
  /** Asked when the turn comes: true when nobody wants the result any more (its client has gone). */
  abandoned?: () => boolean;
  /** The longest the caller waits for its turn, in milliseconds; 0 or absent: no bound. */
  maxWaitMs?: number;
}

export interface TurnStats {
  /** At most this many run at once. */
  limit: number;
  /** Pieces of work running now. */
  running: number;
  /** Callers waiting for a turn. */
  waiting: number;
  /** Work run to its end (or its throw) since the start. */
  done: number;
  /** Turns skipped since the start because their caller had gone. */
  skipped: number;
  /** Turns skipped since the start because their caller had waited over its bound. */
  overdue: number;
}

export interface Turns {
  run<T>(work: () => Promise<T>, terms?: TurnTerms): Promise<T>;
  stats(): TurnStats;
}

/** `now` is a monotonic millisecond clock (injectable for tests); it is read only by callers that wait. */
export function createTurns(limit: number, now: () => number = () => performance.now()): Turns {
  let running = 0;
  let done = 0;
  let skipped = 0;
  let overdue = 0;
  const waiting: Array<() => void> = [];
  // A finished turn goes straight to the next in line, so `running` only falls when nobody waits.
  const handOn = () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return {
    async run<T>(work: () => Promise<T>, terms: TurnTerms = {}): Promise<T> {
      let waitedMs = 0;
      if (running < limit) running++;
      else {
        const since = now();
        await new Promise<void>((resolve) => waiting.push(resolve));
        waitedMs = now() - since;
      }
      if (terms.abandoned?.()) {
        skipped++;
        handOn();
        throw new TurnAbandoned();
      }
      if (terms.maxWaitMs && waitedMs > terms.maxWaitMs) {
        overdue++;
        handOn();
        throw new TurnOverdue(waitedMs, terms.maxWaitMs);
      }
      try {
        return await work();
      } finally {
        done++;
        handOn();
      }
    },
    stats: () => ({ limit, running, waiting: waiting.length, done, skipped, overdue }),
  };
}
