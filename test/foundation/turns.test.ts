import { setImmediate as nextTurn } from 'node:timers/promises';
import { describe, expect, it } from 'vitest';
import { createTurns, TurnAbandoned, TurnOverdue } from '../../src/shared/turns.js';

/** Work that runs until released, recording when it started. */
function heldWork(started: string[], name: string) {
  let release!: () => void;
  const held = new Promise<void>((resolve) => (release = resolve));
  return { work: async () => (started.push(name), await held, name), release: () => release() };
}

describe('createTurns', () => {
  it('runs at most `limit` at once; the rest start in arrival order as turns come free', async () => {
    const turns = createTurns(2);
    const started: string[] = [];
    const jobs = ['a', 'b', 'c', 'd'].map((name) => heldWork(started, name));
    const results = jobs.map((job) => turns.run(job.work));
    await nextTurn();
    expect(started).toEqual(['a', 'b']);
    expect(turns.stats()).toEqual({ limit: 2, running: 2, waiting: 2, done: 0, skipped: 0, overdue: 0 });
    jobs[1]!.release();
    await nextTurn();
    expect(started).toEqual(['a', 'b', 'c']);
    for (const job of jobs) job.release();
    expect(await Promise.all(results)).toEqual(['a', 'b', 'c', 'd']);
    expect(turns.stats()).toEqual({ limit: 2, running: 0, waiting: 0, done: 4, skipped: 0, overdue: 0 });
  });

  it('a caller gone by its turn is skipped: its work never starts, the turn goes to the next', async () => {
    const turns = createTurns(1);
    const started: string[] = [];
    const first = heldWork(started, 'first');
    const gone = heldWork(started, 'gone');
    const last = heldWork(started, 'last');
    let left = false;
    const results = [turns.run(first.work), turns.run(gone.work, { abandoned: () => left }), turns.run(last.work, { abandoned: () => false })];
    await nextTurn();
    left = true; // asked at its turn, not when it joined the line
    first.release();
    last.release();
    const settled = await Promise.allSettled(results);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled']);
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(TurnAbandoned);
    expect(started).toEqual(['first', 'last']);
    expect(turns.stats()).toEqual({ limit: 1, running: 0, waiting: 0, done: 2, skipped: 1, overdue: 0 });
  });

  it('work that throws still hands its turn on', async () => {
    const turns = createTurns(1);
    const failing = turns.run(async () => {
      throw new Error('boom');
    });
    const next = turns.run(async () => 'next');
    await expect(failing).rejects.toThrow('boom');
    expect(await next).toBe('next');
    expect(turns.stats()).toEqual({ limit: 1, running: 0, waiting: 0, done: 2, skipped: 0, overdue: 0 });
  });

  it('a caller that waited over its bound is skipped at its turn; one within it, or without one, runs', async () => {
    let clock = 0;
    const turns = createTurns(1, () => clock);
    const started: string[] = [];
    const first = heldWork(started, 'first');
    const jobs = ['late', 'just', 'patient'].map((name) => heldWork(started, name));
    const results = [
      turns.run(first.work),
      turns.run(jobs[0]!.work, { maxWaitMs: 999 }),
      turns.run(jobs[1]!.work, { maxWaitMs: 1000 }),
      turns.run(jobs[2]!.work),
    ];
    await nextTurn();
    clock = 1000; // the waiting callers have waited exactly 1,000 ms when their turns come
    first.release();
    for (const job of jobs) job.release();
    const settled = await Promise.allSettled(results);
    expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'fulfilled']);
    const reason = (settled[1] as PromiseRejectedResult).reason as TurnOverdue;
    expect(reason).toBeInstanceOf(TurnOverdue);
    expect([reason.waitedMs, reason.maxWaitMs]).toEqual([1000, 999]);
    expect(started).toEqual(['first', 'just', 'patient']);
    expect(turns.stats()).toEqual({ limit: 1, running: 0, waiting: 0, done: 3, skipped: 0, overdue: 1 });
  });

  it('the bound counts only the wait: a caller that found a free turn runs however slow the clock', async () => {
    let clock = 0;
    const turns = createTurns(1, () => (clock += 5000));
    expect(await turns.run(async () => 'ran', { maxWaitMs: 1 })).toBe('ran');
    expect(clock).toBe(0); // not even read
  });

  it('a gone client is told apart from an overdue one: gone wins, both hand the turn on', async () => {
    let clock = 0;
    const turns = createTurns(1, () => clock);
    const first = heldWork([], 'first');
    const results = [
      turns.run(first.work),
      turns.run(async () => 'gone', { abandoned: () => true, maxWaitMs: 1 }),
      turns.run(async () => 'late', { maxWaitMs: 1 }),
      turns.run(async () => 'next'),
    ];
    await nextTurn();
    clock = 10;
    first.release();
    const settled = await Promise.allSettled(results);
    expect((settled[1] as PromiseRejectedResult).reason).toBeInstanceOf(TurnAbandoned);
    expect((settled[2] as PromiseRejectedResult).reason).toBeInstanceOf(TurnOverdue);
    expect(settled[3]).toEqual({ status: 'fulfilled', value: 'next' });
    expect(turns.stats()).toEqual({ limit: 1, running: 0, waiting: 0, done: 2, skipped: 1, overdue: 1 });
  });
});
