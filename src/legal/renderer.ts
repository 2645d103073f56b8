import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { availableParallelism } from 'node:os';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import { AppError } from '../errors.js';
import { markerNesting, MAX_NESTING, nestingProblem, type RenderOutcome } from './nesting.js';

/**
 * Renders legal Markdown off the event loop (SECURITY hardening item 5): a small pool of worker
 * threads runs `renderMarkdownBounded`; a render that takes longer than `timeoutMs` gets its worker
 * terminated (and replaced at once) and is refused with 400 `invalid_request`, like any
 * content that cannot be rendered — never a 500, never a stalled `/healthz`.
 *
 * The worker entry resolves from this file: `render-worker.js` beside the compiled code
 * (`node dist/src/server.js`), or `render-worker.ts` loaded through tsx's API when running from the
 * TypeScript sources (`tsx src/server.ts`, vitest): on Node 20 a worker does not inherit the parent
 * thread's loader hooks, so the `.ts` entry cannot be given to `new Worker` directly.
 */

export const RENDER_TIMEOUT_MS = 2000;
/** At most 2 workers, and always a core left for the event loop (1 on a 2-CPU machine). */
const DEFAULT_WORKERS = Math.max(1, Math.min(2, availableParallelism() - 1));
/** Jobs waiting for a worker before new ones get 503 (each job holds a worker at most `timeoutMs`). */
const DEFAULT_MAX_QUEUE = 16;
const STARTUP_TIMEOUT_MS = 30_000;
/** An idle worker is stopped after this long (the next publish starts one again). */
const IDLE_MS = 60_000;

export interface MarkdownRendererOptions {
  timeoutMs?: number;
  maxWorkers?: number;
  maxQueue?: number;
}

interface Job {
  id: number;
  markdown: string;
  resolve: (html: string) => void;
  reject: (error: Error) => void;
}

interface Slot {
  worker: Worker;
  ready: boolean;
  job?: Job;
  timer?: NodeJS.Timeout;
}

type WorkerMessage = { ready: true } | ({ id: number } & RenderOutcome);

/** 400 `invalid_request` naming what is wrong with `content`. */
export function contentRefused(problem: string, detail?: string): AppError {
  return new AppError('invalid_request', {
    message: `The document cannot be published: ${problem}.`,
    details: [{ path: 'body.content', message: problem }],
    detail: detail ?? `legal markdown refused: ${problem}`,
  });
}

/** The ESM build of `tsx/esm/api` (its CommonJS build cannot register from a worker), read from tsx's export map. */
function tsxEsmApi(from: string): string {
  const manifest = createRequire(from).resolve('tsx/package.json');
  const pkg = JSON.parse(readFileSync(manifest, 'utf8')) as { exports: Record<string, { import: { default: string } }> };
  return new URL(pkg.exports['./esm/api']!.import.default, pathToFileURL(manifest)).href;
}

function startWorker(): Worker {
  const self = import.meta.url;
  // No inherited node flags (`--input-type`, loaders…): the worker needs none, and some refuse a file entry.
  const options = { execArgv: [], resourceLimits: { maxOldGenerationSizeMb: 256, maxYoungGenerationSizeMb: 32, stackSizeMb: 4 } };
  if (!self.endsWith('.ts')) return new Worker(new URL('./render-worker.js', self), options);
  const entry = JSON.stringify(new URL('./render-worker.ts', self).href);
  const tsx = JSON.stringify(tsxEsmApi(self));
  const bootstrap = `import(${tsx}).then((m) => (m.tsImport ?? m.default.tsImport)(${entry}, ${entry}))`;
  return new Worker(bootstrap, { ...options, eval: true });
}

export class MarkdownRenderer {
  private readonly slots = new Set<Slot>();
  private readonly queue: Job[] = [];
  private readonly timeoutMs: number;
  private readonly maxWorkers: number;
  private readonly maxQueue: number;
  private nextId = 1;
  private closed = false;

  constructor(options: MarkdownRendererOptions = {}) {
    this.timeoutMs = options.timeoutMs ?? RENDER_TIMEOUT_MS;
    this.maxWorkers = options.maxWorkers ?? DEFAULT_WORKERS;
    this.maxQueue = options.maxQueue ?? DEFAULT_MAX_QUEUE;
  }

  /** Sanitized HTML of `markdown`; 400 `invalid_request` when it cannot be rendered within the limits. */
  render(markdown: string): Promise<string> {
    // Linear pre-check on this thread: deeply nested markers are refused without using a worker.
    if (markerNesting(markdown) > MAX_NESTING) return Promise.reject(contentRefused(nestingProblem));
    if (this.closed) return Promise.reject(new AppError('service_unavailable', { detail: 'legal renderer closed' }));
    if (this.queue.length >= this.maxQueue) {
      return Promise.reject(new AppError('service_unavailable', { detail: 'legal render queue full', headers: { 'retry-after': '5' } }));
    }
    return new Promise<string>((resolve, reject) => {
      this.queue.push({ id: this.nextId++, markdown, resolve, reject });
      this.pump();
    });
  }

  /** Stops every worker; queued renders fail with 503. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.queue.splice(0)) job.reject(new AppError('service_unavailable', { detail: 'legal renderer closed' }));
    await Promise.all([...this.slots].map((slot) => this.discard(slot)));
  }

  private pump(): void {
    if (this.closed) return;
    while (this.queue.length > 0) {
      const idle = [...this.slots].find((slot) => slot.ready && !slot.job);
      if (!idle) break;
      this.assign(idle, this.queue.shift()!);
    }
    const starting = [...this.slots].filter((slot) => !slot.ready).length;
    for (let n = starting; n < this.queue.length && this.slots.size < this.maxWorkers; n++) this.spawn();
  }

  private spawn(): void {
    const slot: Slot = { worker: startWorker(), ready: false };
    this.slots.add(slot);
    slot.timer = setTimeout(() => this.failStartup(slot, new Error('render worker did not start in time')), STARTUP_TIMEOUT_MS);
    slot.worker.on('message', (message: WorkerMessage) => this.onMessage(slot, message));
    slot.worker.on('error', (error) => this.onExit(slot, error));
    slot.worker.on('exit', (code) => this.onExit(slot, new Error(`render worker exited with code ${code}`)));
  }

  private assign(slot: Slot, job: Job): void {
    clearTimeout(slot.timer);
    slot.job = job;
    slot.worker.ref();
    slot.worker.postMessage({ id: job.id, markdown: job.markdown });
    slot.timer = setTimeout(() => this.onTimeout(slot), this.timeoutMs);
  }

  private onMessage(slot: Slot, message: WorkerMessage): void {
    if ('ready' in message) {
      clearTimeout(slot.timer);
      slot.ready = true;
      this.idle(slot);
      this.pump();
      return;
    }
    const job = slot.job;
    if (!job || job.id !== message.id) return;
    clearTimeout(slot.timer);
    slot.job = undefined;
    if (message.ok) job.resolve(message.html);
    else job.reject(contentRefused(message.problem));
    this.idle(slot);
    this.pump();
  }

  /** An idle worker does not keep the process alive, and stops after IDLE_MS. */
  private idle(slot: Slot): void {
    slot.worker.unref();
    slot.timer = setTimeout(() => void this.discard(slot), IDLE_MS);
    slot.timer.unref();
  }

  private onTimeout(slot: Slot): void {
    const job = slot.job;
    slot.job = undefined;
    void this.discard(slot);
    job?.reject(contentRefused(`the content took longer than ${this.timeoutMs / 1000} s to render; simplify its formatting`));
    // Replaced at once, so the next publish does not wait for a worker to start.
    if (!this.closed && this.slots.size < this.maxWorkers) this.spawn();
    this.pump();
  }

  /** The worker died (out of memory, crash) or failed to start. */
  private onExit(slot: Slot, error: Error & { code?: string }): void {
    if (!this.slots.has(slot)) return;
    if (!slot.ready) return this.failStartup(slot, error);
    const job = slot.job;
    slot.job = undefined;
    void this.discard(slot);
    if (job) {
      job.reject(
        error.code === 'ERR_WORKER_OUT_OF_MEMORY'
          ? contentRefused('the content needs too much memory to render', error.message)
          : new AppError('internal_error', { detail: 'legal render worker failed', cause: error }),
      );
    }
    this.pump();
  }

  /** A worker that cannot start would fail again: the waiting jobs fail now instead of respawning forever. */
  private failStartup(slot: Slot, error: Error): void {
    if (!this.slots.has(slot)) return;
    void this.discard(slot);
    for (const job of this.queue.splice(0)) job.reject(new AppError('internal_error', { detail: 'legal render worker did not start', cause: error }));
  }

  private async discard(slot: Slot): Promise<void> {
    if (!this.slots.delete(slot)) return;
    clearTimeout(slot.timer);
    await slot.worker.terminate().catch(() => undefined);
  }
}
