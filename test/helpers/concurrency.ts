import { execFileSync } from 'node:child_process';
import { closeSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { open } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expect } from 'vitest';

/** Concurrency helpers for tests that must show what happens while work is in flight. */

export /**
 * Occupies every libuv worker thread — where argon2 hashes — until released: each worker blocks
 * opening a FIFO for reading until a writer opens it. While held, nothing is hashed, so an answer that
 * arrives meanwhile was given without evaluating a password, and requests sent now are truly
 * concurrent with those sent before.
 */
function holdThreadPool(): () => Promise<void> {
  const dir = mkdtempSync(join(tmpdir(), 'gatehouse-pool-'));
  const fifo = join(dir, 'hold');
  execFileSync('mkfifo', [fifo]);
  const readers = Array.from({ length: Number(process.env.UV_THREADPOOL_SIZE) || 4 }, () => open(fifo, 'r'));
  let released = false;
  return async () => {
    if (released) return;
    released = true;
    const writer = openSync(fifo, 'w');
    for (const handle of await Promise.all(readers)) await handle.close();
    closeSync(writer);
    rmSync(dir, { recursive: true, force: true });
  };
}

/** Waits (real time, bounded) until `check` holds; returns whether it did. */
export async function eventually(check: () => Promise<boolean>, ms = 5000): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (Date.now() < deadline) {
    if (await check()) return true;
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
  return check();
}

/**
 * Waits `pauseMs`, then runs `probe`; returns how long it took beyond the pause. Timed from before the
 * pause, so an event loop blocked during the pause (the timer firing late) counts as much as a slow answer.
 */
export async function timeProbeAfterPause(pauseMs: number, probe: () => Promise<void>): Promise<number> {
  const started = performance.now();
  await new Promise((resolve) => setTimeout(resolve, pauseMs));
  await probe();
  return performance.now() - started - pauseMs;
}

/**
 * Probe latencies taken while work that must not hold the event loop runs: the median under
 * `medianUnderMs`, every one under a second. Held by the work, every probe would wait for it (seconds);
 * the median, not the maximum, is what must be small, since one probe caught by a GC pause or a stall
 * of a busy CI host (88–381 ms seen) is not the work's doing.
 */
export function expectAnsweredAtOnce(latenciesMs: readonly number[], medianUnderMs: number): void {
  const sorted = [...latenciesMs].sort((a, b) => a - b);
  expect(sorted[sorted.length >> 1]).toBeLessThan(medianUnderMs);
  expect(sorted.at(-1)).toBeLessThan(1000);
}
