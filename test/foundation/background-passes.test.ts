import { describe, expect, it } from 'vitest';
import { BackgroundPasses } from '../../src/shared/background-passes.js';

/** The passes of a background job (src/shared/background-passes.ts): one at a time, one more after a nudge during a pass. */
describe('BackgroundPasses', () => {
  function job() {
    const calls: string[] = [];
    let release: () => void = () => undefined;
    const passes = new BackgroundPasses(
      () => {
        calls.push('pass');
        return new Promise<void>((resolve) => (release = resolve));
      },
      () => calls.push('error'),
      60_000,
    );
    return { calls, passes, finish: async () => (release(), await new Promise((r) => setImmediate(r))) };
  }

  it('does nothing until started, runs a pass at start, and never two at once', async () => {
    const { calls, passes, finish } = job();
    passes.nudge();
    expect(calls).toEqual([]);
    passes.start();
    passes.nudge();
    passes.nudge();
    expect(calls).toEqual(['pass']);
    await finish(); // the nudges during the pass ask for exactly one more
    expect(calls).toEqual(['pass', 'pass']);
    await finish();
    expect(calls).toEqual(['pass', 'pass']);
    const stopped = passes.stop();
    await stopped;
    passes.nudge();
    expect(calls).toEqual(['pass', 'pass']);
  });

  it('stop waits for the running pass, and no pass follows it', async () => {
    const { calls, passes, finish } = job();
    passes.start();
    passes.nudge();
    let done = false;
    const stopping = passes.stop().then(() => (done = true));
    await new Promise((r) => setImmediate(r));
    expect(done).toBe(false);
    await finish();
    await stopping;
    expect(passes.isStopped).toBe(true);
    expect(calls).toEqual(['pass']);
  });

  it('a failed pass is reported and the next nudge runs again', async () => {
    const errors: unknown[] = [];
    let runs = 0;
    const passes = new BackgroundPasses(async () => {
      runs += 1;
      throw new Error('boom');
    }, (error) => errors.push(error), 60_000);
    passes.start();
    await new Promise((r) => setImmediate(r));
    passes.nudge();
    await new Promise((r) => setImmediate(r));
    await passes.stop();
    expect(runs).toBe(2);
    expect(errors).toHaveLength(2);
  });
});
