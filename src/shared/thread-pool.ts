import { readFile } from 'node:fs/promises';
import { setPriority } from 'node:os';

/**
 * libuv's thread pool below the event loop's CPU priority (Linux).
 *
 * Password hashing runs there: up to one argon2 computation per core plus one (src/auth/passwords.ts),
 * so a burst of password sign-ins keeps every core busy. At equal priority the event loop then waited for
 * the scheduler each time it woke, and every request waited with it: bearer reads beside a login burst
 * took 4 ms at the median instead of 1 (docs/adr/0009-password-line.md). At nice 10 the kernel runs the
 * event loop first when both want a core; the pool keeps every core the loop leaves idle, so logins per
 * second do not change.
 */
export const THREAD_POOL_NICE = 10;

/** libuv's maximum pool size (MAX_THREADPOOL_SIZE). */
const MAX_THREADS = 1024;

/**
 * The number of threads libuv starts for its pool, read from UV_THREADPOOL_SIZE the way libuv reads it
 * (`atoi`; 0 or unreadable gives 1, more than 1024 gives 1024; unset gives 4).
 */
export function threadPoolSize(value: string | undefined): number {
  if (value === undefined) return 4;
  const parsed = Number.parseInt(value, 10);
  // libuv keeps the count unsigned: a negative value wraps around to a huge one, then the cap applies.
  const count = Number.isNaN(parsed) ? 0 : parsed < 0 ? MAX_THREADS : parsed;
  return Math.min(Math.max(count, 1), MAX_THREADS);
}

/** The thread id a `/proc/thread-self/stat` line starts with. */
const threadIdOf = (stat: string): number => Number(stat.slice(0, stat.indexOf(' ')));

/** Rounds of reads before giving up on finding every pool thread (each takes well under a millisecond). */
const MAX_ROUNDS = 200;

/**
 * The pool's threads, found by asking them: libuv 1.46 does not name its threads, but an asynchronous
 * open runs on a pool thread, and `/proc/thread-self` opened there is that thread's. Reads go out a
 * round at a time, twice the pool's size at once, until every thread has answered.
 */
export async function threadPoolThreadIds(size: number): Promise<number[]> {
  const seen = new Set<number>();
  for (let round = 0; round < MAX_ROUNDS && seen.size < size; round++) {
    const stats = await Promise.all(Array.from({ length: 2 * size }, () => readFile('/proc/thread-self/stat', 'utf8')));
    for (const stat of stats) seen.add(threadIdOf(stat));
  }
  return [...seen];
}

/** What was done: `threads` of the pool's `of` set to `nice`, or why nothing was. */
export type ThreadPoolPriority = { nice: number; threads: number; of: number } | { skipped: string };

/**
 * Sets every thread of libuv's pool to `nice`, leaving the event loop, worker threads and V8's own
 * threads as they are. Lowering a priority needs no privilege. Elsewhere than Linux, or where the
 * kernel refuses, nothing changes and the reason is returned. A pool thread that did not answer
 * within the rounds keeps its priority (`threads` < `of`).
 */
export async function lowerThreadPoolPriority(nice = THREAD_POOL_NICE): Promise<ThreadPoolPriority> {
  if (process.platform !== 'linux') return { skipped: `not on Linux (${process.platform})` };
  // libuv's own setting, which libuv read when the pool started: not a Gatehouse setting (config.ts).
  const size = threadPoolSize(process.env.UV_THREADPOOL_SIZE);
  try {
    const threads = await threadPoolThreadIds(size);
    for (const tid of threads) setPriority(tid, nice);
    return { nice, threads: threads.length, of: size };
  } catch (error) {
    return { skipped: error instanceof Error ? error.message : String(error) };
  }
}
