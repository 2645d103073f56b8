import type { KeyObject } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { Coalescer } from '../shared/coalescer.js';
import { signEs256 } from './jwt-node-crypto.js';

/**
 * ES256 signatures made off the main thread when several are asked at once (bench/RESULTS.md, finding
 * 94). Every grant signs an ES256 access token. On the main thread, the thread that sets a SQLite
 * grant's pace, that signature was a sixth of its time while the second core idled. Handing each
 * signature to the libuv pool cost the main thread nearly what it saved (finding 26: a job and a
 * wake-up per call); one message to a worker thread per batch costs it a few microseconds a signature.
 *
 * The signatures asked during one turn of the event loop form a batch (a Coalescer), sent at once when
 * it is full, so the worker signs the first ones while the main thread prepares the rest. A signature
 * alone in its turn is made here: the main thread has time then, a message would cost a third of the
 * signature, and a server that never has two at once (a login's, say) never starts the worker and its
 * isolate (~10 MB).
 *
 * The worker is started by the first batch and holds the private keys it was sent, by `kid`. It keeps
 * the process alive only while it owes an answer. If it stops (a crash) or cannot be started, the
 * batches it owed fail, and the Coalescer runs each of their signatures again alone, which signs it
 * here; `onStop` is told, and every later signature is made here: a signer that fell back stays
 * slower, never fails a grant, and never restarts a worker in a loop. A batch the worker could not
 * sign whole is signed here the same way, so a signature that cannot be made fails alone.
 */

/** A batch the worker is asked to sign: keys it does not hold yet, then one `kid` per input. */
interface BatchMessage {
  batch: number;
  keys: Array<[kid: string, key: KeyObject]>;
  kids: string[];
  inputs: string[];
}

/** The worker's answer: the base64url signature of each input of the batch, or why it could not sign them all. */
type ReplyMessage = { batch: number; signatures: string[] } | { batch: number; error: string };

// CommonJS run by the Worker as given (`eval`): the same in the built server and under the tests'
// TypeScript loader. Each signature is signEs256's: SHA-256, P-256, the IEEE P1363 encoding JWS uses.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { sign } = require('node:crypto');
const keys = new Map();
parentPort.on('message', ({ batch, keys: added, kids, inputs }) => {
  for (const [kid, key] of added) keys.set(kid, key);
  try {
    const signatures = inputs.map((input, i) =>
      sign('sha256', Buffer.from(input), { key: keys.get(kids[i]), dsaEncoding: 'ieee-p1363' }).toString('base64url'));
    parentPort.postMessage({ batch, signatures });
  } catch (error) {
    parentPort.postMessage({ batch, error: String(error && error.message) });
  }
});
`;

/** Signatures sent in one message at most: enough to share a message's cost, few enough to start signing early. */
const BATCH_SIZE = 8;

/** A signing worker thread, as Es256Signer starts one. (No heap limit: a worker that reaches one can abort the whole process.) */
export const startSigningWorker = (): Worker => new Worker(WORKER_SOURCE, { eval: true });

/** One signature asked: the signing input and the key to sign it with. */
interface Job {
  input: string;
  kid: string;
  key: KeyObject;
}

/** The running worker and what it was sent. */
interface RunningWorker {
  worker: Worker;
  /** The key object it holds under each `kid` (a key reload makes new objects: sent again when one changes). */
  keys: Map<string, KeyObject>;
  /** The batches it has not answered yet. */
  owed: Map<number, { jobs: Job[]; resolve: (jwts: Map<Job, string>) => void; reject: (error: Error) => void }>;
}

export class Es256Signer {
  private running?: RunningWorker;
  /** Set once the worker stopped or the signer was closed: every signature is made here from then on. */
  private here = false;
  private nextBatch = 0;
  private readonly batches = new Coalescer<Job, string>((jobs) => this.run(jobs), { maxBatch: BATCH_SIZE });

  /**
   * @param onStop told when the worker stopped unasked, with why; signatures are made on the main thread after it.
   * @param startWorker starts the worker (tests keep a handle on it to stop it).
   */
  constructor(
    private readonly onStop: (error: Error) => void = () => undefined,
    private readonly startWorker: () => Worker = startSigningWorker,
  ) {}

  /** The compact JWS of `input` (a JWS signing input), signed with `key`, the private ES256 key published as `kid`. */
  sign(input: string, kid: string, key: KeyObject): Promise<string> {
    // run answers every job of a batch, so the answer is never undefined.
    return this.batches.submit({ input, kid, key }) as Promise<string>;
  }

  /** Whether the worker thread runs (started by the first batch of two or more signatures). */
  get onWorker(): boolean {
    return this.running !== undefined;
  }

  /** Stops the worker; what it still owed is signed here, and so is every later signature. */
  async close(): Promise<void> {
    this.here = true;
    const running = this.running;
    this.running = undefined;
    if (running) await retire(running, new Error('the ES256 signer was closed'));
  }

  private run(jobs: Job[]): Promise<Map<Job, string>> {
    if (jobs.length === 1 || this.here) return Promise.resolve(signHere(jobs));
    try {
      return this.send(jobs);
    } catch (error) {
      // The worker could not be started or written to: as if it had stopped.
      this.fallBack(error as Error);
      throw error;
    }
  }

  private send(jobs: Job[]): Promise<Map<Job, string>> {
    const running = (this.running ??= this.start());
    const keys: BatchMessage['keys'] = [];
    for (const job of jobs) {
      if (running.keys.get(job.kid) === job.key) continue;
      running.keys.set(job.kid, job.key);
      keys.push([job.kid, job.key]);
    }
    const batch = this.nextBatch++;
    running.worker.postMessage({ batch, keys, kids: jobs.map((j) => j.kid), inputs: jobs.map((j) => j.input) } satisfies BatchMessage);
    if (running.owed.size === 0) running.worker.ref();
    return new Promise((resolve, reject) => running.owed.set(batch, { jobs, resolve, reject }));
  }

  private start(): RunningWorker {
    const worker = this.startWorker();
    const running: RunningWorker = { worker, keys: new Map(), owed: new Map() };
    worker.on('message', (reply: ReplyMessage) => {
      const owed = running.owed.get(reply.batch);
      if (!owed) return;
      running.owed.delete(reply.batch);
      if (running.owed.size === 0) worker.unref();
      if ('error' in reply) owed.reject(new Error(`ES256 signing failed: ${reply.error}`));
      else owed.resolve(new Map(owed.jobs.map((job, i) => [job, `${job.input}.${reply.signatures[i]}`])));
    });
    // 'error' (an uncaught exception) is followed by 'exit'; a worker that fails to start may give 'error' alone.
    const stopped = (error: Error) => {
      if (this.running === running) this.fallBack(error); // else closed, or already handled
    };
    worker.on('error', stopped);
    worker.on('exit', (code) => stopped(new Error(`the ES256 signing worker exited with code ${code}`)));
    return running;
  }

  /** Signs here for good from now on: the batches the worker owed fail (and are signed here, one by one), and `onStop` is told why. */
  private fallBack(error: Error): void {
    const running = this.running;
    this.running = undefined;
    this.here = true;
    if (running) void retire(running, error);
    this.onStop(error);
  }
}

/** Fails the batches `running` still owes with `error` (the Coalescer signs each of their jobs again, alone), and stops it. */
function retire(running: RunningWorker, error: Error): Promise<number> {
  for (const owed of running.owed.values()) owed.reject(error);
  running.owed.clear();
  return running.worker.terminate();
}

/** Signs `jobs` on this thread; throws when one cannot be signed. */
function signHere(jobs: Job[]): Map<Job, string> {
  try {
    return new Map(jobs.map((job) => [job, signEs256(job.input, job.key)]));
  } catch (error) {
    throw new Error(`ES256 signing failed: ${(error as Error).message}`);
  }
}
