import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';
import { decide, decideInRedis, MemoryWindows, type WindowDecision } from '../../src/throttle/sliding-window.js';

/**
 * The sliding-window rule (issue 11) as a table: each step is (seconds since start, record?) → what it
 * answers. The same table runs against the in-memory store and the Redis script, which must agree.
 */
interface Step {
  at: number;
  record?: boolean;
  expect: Pick<WindowDecision, 'allowed' | 'retryAfter'> & { count?: number };
}

const CASES: Array<{ name: string; limit: number; window: number; steps: Step[] }> = [
  {
    name: 'the limit in one burst, then refused until the first event leaves the window',
    limit: 3,
    window: 60,
    steps: [
      { at: 0, expect: { allowed: true, retryAfter: 0, count: 1 } },
      { at: 0, expect: { allowed: true, retryAfter: 0, count: 2 } },
      { at: 0, expect: { allowed: true, retryAfter: 0, count: 3 } },
      { at: 10, expect: { allowed: false, retryAfter: 50, count: 3 } },
      { at: 59, expect: { allowed: false, retryAfter: 1 } },
      { at: 60, expect: { allowed: true, retryAfter: 0, count: 1 } },
    ],
  },
  {
    name: 'no edge: a burst at the end of one minute and at the start of the next is still one limit',
    limit: 4,
    window: 60,
    steps: [
      { at: 58, expect: { allowed: true, retryAfter: 0 } },
      { at: 59, expect: { allowed: true, retryAfter: 0 } },
      { at: 60, expect: { allowed: true, retryAfter: 0 } },
      { at: 61, expect: { allowed: true, retryAfter: 0, count: 4 } },
      { at: 62, expect: { allowed: false, retryAfter: 56 } },
      { at: 117, expect: { allowed: false, retryAfter: 1 } },
      { at: 118, expect: { allowed: true, retryAfter: 0, count: 4 } },
    ],
  },
  {
    name: 'refused attempts are not counted; looking counts nothing',
    limit: 2,
    window: 10,
    steps: [
      { at: 0, expect: { allowed: true, retryAfter: 0 } },
      { at: 5, expect: { allowed: true, retryAfter: 0 } },
      { at: 6, expect: { allowed: false, retryAfter: 4 } },
      { at: 7, expect: { allowed: false, retryAfter: 3 } },
      { at: 10, record: false, expect: { allowed: true, retryAfter: 0, count: 1 } },
      { at: 10, expect: { allowed: true, retryAfter: 0, count: 2 } },
      { at: 14, record: false, expect: { allowed: false, retryAfter: 1 } },
      { at: 15, expect: { allowed: true, retryAfter: 0, count: 2 } },
    ],
  },
];

const T0 = 1_800_000_000;

describe('sliding window: the pure rule', () => {
  for (const c of CASES) {
    it(c.name, () => {
      const events: number[] = [];
      for (const step of c.steps) {
        const got = decide(events, { limit: c.limit, windowSeconds: c.window, now: T0 + step.at, record: step.record ?? true });
        expect({ at: step.at, ...got }).toMatchObject({ at: step.at, ...step.expect });
      }
    });
  }

  it('the memory store keeps keys apart and forgets idle keys', () => {
    const store = new MemoryWindows();
    const hit = (key: string, now: number) => store.decide({ key, limit: 1, windowSeconds: 60, now, record: true });
    expect(hit('a', T0).allowed).toBe(true);
    expect(hit('b', T0).allowed).toBe(true);
    expect(hit('a', T0 + 1).allowed).toBe(false);
    expect(hit('a', T0 + 60).allowed).toBe(true);
  });
});

describe.runIf(process.env.TEST_REDIS_URL)('sliding window: the Redis script agrees with the rule', () => {
  const redis = new Redis(process.env.TEST_REDIS_URL ?? '');
  afterAll(() => redis.disconnect());
  for (const c of CASES) {
    it(c.name, async () => {
      const key = `test:${Math.random().toString(36).slice(2)}`;
      for (const step of c.steps) {
        const got = await decideInRedis(redis, { key, limit: c.limit, windowSeconds: c.window, now: T0 + step.at, record: step.record ?? true });
        expect({ at: step.at, ...got }).toMatchObject({ at: step.at, ...step.expect });
      }
    });
  }
});
