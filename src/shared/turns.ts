/**
 * Turns at a scarce resource: at most `limit` pieces of work run at once, the others wait in arrival
 * order. A caller may say how to tell that nobody wants its result any more (`abandoned`, asked when
 * its turn comes): then the work is not started, the turn goes to the next in line, and the call
 * rejects with TurnAbandoned. Under a flood whose clients give up, the line then drains at the rate they
 * leave instead of computing answers nobody will read.
 */

export class TurnAbandoned extends Error {
  constructor() {
    super('abandoned before its turn: not started');
    this.name = 'TurnAbandoned';
  }
}

export interface TurnStats {
  /** Pieces of work running now. */
  running: number;
  /** Callers waiting for a turn. */
  waiting: number;
  /** Work run to its end (or its throw) since the start. */
  done: number;
  /** Turns skipped since the start because their caller had gone. */
  skipped: number;
}

export interface Turns {
  run<T>(work: () => Promise<T>, abandoned?: () => boolean): Promise<T>;
  stats(): TurnStats;
}

export function createTurns(limit: number): Turns {
  let running = 0;
  let done = 0;
  let skipped = 0;
  const waiting: Array<() => void> = [];
  // A finished turn goes straight to the next in line, so `running` only falls when nobody waits.
  const handOn = () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };
  return {
    async run<T>(work: () => Promise<T>, abandoned?: () => boolean): Promise<T> {
      if (running < limit) running++;
      else await new Promise<void>((resolve) => waiting.push(resolve));
      if (abandoned?.()) {
        skipped++;
        handOn();
        throw new TurnAbandoned();
      }
      try {
        return await work();
      } finally {
        done++;
        handOn();
      }
    },
    stats: () => ({ running, waiting: waiting.length, done, skipped }),
  };
}
