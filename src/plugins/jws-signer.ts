import type { KeyObject } from 'node:crypto';
import { Worker } from 'node:worker_threads';
import { Coalescer } from '../shared/coalescer.js';
import { signEs256, signRs256 } from './jwt-node-crypto.js';
import type { SigningAlg } from './keys.js';

/**
 * Our JWT signatures, made off the main thread when several of one algorithm are asked at once
 * (bench/RESULTS.md, findings 94, 106 and 108). Every grant signs an ES256 access token, and the code
 * grant and the refresh with `openid` an RS256 ID token. On SQLite the main thread sets a grant's pace
 * while the second core has room: starting a pool job (a `crypto.sign` with a callback) costs it a job
 * and a wake-up per signature (finding 26), one message to a worker thread per batch a few microseconds
 * a signature.
 *
 * The signatures of one algorithm asked during one turn of the event loop form a batch (a Coalescer per
 * algorithm), sent at once when it is full, so the worker signs the first ones while the main thread
 * prepares the rest. A signature alone in its turn is made the way that suits one: an ES256 one (~30 µs)
 * inline, where a message would cost a third of it; an RS256 one (0.25–0.75 ms by host) as a
 * `crypto.sign` job on the libuv pool, which keeps the main thread free meanwhile. So a server that never
 * has two at once never starts the worker and its isolate (~10 MB).
 *
 * Both algorithms share one worker: a second isolate would cost a PostgreSQL login run the ~8 MB that
 * took it over the 200 MB goal (finding 106). An access token, which a refresh must have before it can
 * write, must not wait behind a batch of RSA work there, so the worker signs an ES256 batch as soon as
 * it arrives and RS256 signatures one per turn of its event loop: the messages that came meanwhile are
 * read between two of them, and an ES256 batch waits behind one RSA signature at most.
 *
 * The worker is started by the first batch and holds the private keys it was sent, by `kid`. It keeps
 * the process alive only while it owes an answer. If it stops (a crash) or cannot be started, the
 * batches it owed fail, and each Coalescer runs their signatures again alone, which signs each without
 * the worker; `onStop` is told, and every later signature is made without it: a signer that fell back
 * stays slower, never fails a grant, and never restarts a worker in a loop. A batch the worker could not
 * sign whole is signed without it the same way, so a signature that cannot be made fails alone.
 */

/** A batch the worker is asked to sign: keys it does not hold yet, then one `kid` per input, all of `alg`. */
interface BatchMessage {
  batch: number;
  alg: SigningAlg;
  keys: Array<[kid: string, key: KeyObject]>;
  kids: string[];
  inputs: string[];
}

/** The worker's answer: the base64url signature of each input of the batch, or why it could not sign them all. */
type ReplyMessage = { batch: number; signatures: string[] } | { batch: number; error: string };

// CommonJS run by the Worker as given (`eval`): the same in the built server and under the tests'
// TypeScript loader. Each signature is SHA-256 with the key's own scheme: for a P-256 key signEs256's
// (the IEEE P1363 encoding JWS uses), for an RSA key signRs256's (PKCS#1 v1.5, which has no encoding to
// choose: the option does nothing there). RS256 batches wait in a queue signed one signature per
// setImmediate, so the messages that arrive meanwhile (ES256 batches, signed at once) are read between.
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { sign } = require('node:crypto');
const keys = new Map();
const rsa = [];
const signOne = (kid, input) =>
  sign('sha256', Buffer.from(input), { key: keys.get(kid), dsaEncoding: 'ieee-p1363' }).toString('base64url');
const failed = (batch, error) => parentPort.postMessage({ batch, error: String(error && error.message) });
function signNextRsa() {
  const head = rsa[0];
  const i = head.signatures.length;
  try {
    head.signatures.push(signOne(head.kids[i], head.inputs[i]));
    if (head.signatures.length === head.inputs.length) {
      rsa.shift();
      parentPort.postMessage({ batch: head.batch, signatures: head.signatures });
    }
  } catch (error) {
    rsa.shift();
    failed(head.batch, error);
  }
  if (rsa.length > 0) setImmediate(signNextRsa);
}
parentPort.on('message', ({ batch, alg, keys: added, kids, inputs }) => {
  for (const [kid, key] of added) keys.set(kid, key);
  if (alg === 'RS256') {
    if (rsa.push({ batch, kids, inputs, signatures: [] }) === 1) setImmediate(signNextRsa);
    return;
  }
  try {
    parentPort.postMessage({ batch, signatures: inputs.map((input, i) => signOne(kids[i], input)) });
  } catch (error) {
    failed(batch, error);
  }
});
`;

/** Signatures sent in one message at most: enough to share a message's cost, few enough to start signing early. */
const BATCH_SIZE = 8;

/** A signing worker thread, as JwsSigner starts one. (No heap limit: a worker that reaches one can abort the whole process.) */
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
  owed: Map<number, { alg: SigningAlg; jobs: Job[]; resolve: (jwts: Map<Job, string>) => void; reject: (error: Error) => void }>;
}

export class JwsSigner {
  private running?: RunningWorker;
  /** Set once the worker stopped or the signer was closed: every signature is made without it from then on. */
  private noWorker = false;
  private nextBatch = 0;
  private readonly batches: Readonly<Record<SigningAlg, Coalescer<Job, string>>> = {
    ES256: new Coalescer((jobs) => this.run('ES256', jobs), { maxBatch: BATCH_SIZE }),
    RS256: new Coalescer((jobs) => this.run('RS256', jobs), { maxBatch: BATCH_SIZE }),
  };

  /**
   * @param onStop told when the worker stopped unasked, with why; signatures are made without it after that.
   * @param startWorker starts the worker (tests keep a handle on it to stop it).
   */
  constructor(
    private readonly onStop: (error: Error) => void = () => undefined,
    private readonly startWorker: () => Worker = startSigningWorker,
  ) {}

  /** The compact JWS of `input` (a JWS signing input for `alg`), signed with `key`, the private `alg` key published as `kid`. */
  sign(alg: SigningAlg, input: string, kid: string, key: KeyObject): Promise<string> {
    // run answers every job of a batch, so the answer is never undefined.
    return this.batches[alg].submit({ input, kid, key }) as Promise<string>;
  }

  /** Whether the worker thread runs (started by the first batch of two or more signatures of one algorithm). */
  get onWorker(): boolean {
    return this.running !== undefined;
  }

  /** Stops the worker; what it still owed is signed without it, and so is every later signature. */
  async close(): Promise<void> {
    await this.stopUsingWorker(new Error('the signer was closed'));
  }

  private run(alg: SigningAlg, jobs: Job[]): Promise<Map<Job, string>> {
    if (jobs.length === 1 || this.noWorker) return signWithoutWorker(alg, jobs);
    try {
      return this.send(alg, jobs);
    } catch (error) {
      // The worker could not be started or written to: as if it had stopped.
      this.fallBack(error as Error);
      throw error;
    }
  }

  private send(alg: SigningAlg, jobs: Job[]): Promise<Map<Job, string>> {
    const running = (this.running ??= this.start());
    const keys: BatchMessage['keys'] = [];
    for (const job of jobs) {
      if (running.keys.get(job.kid) === job.key) continue;
      running.keys.set(job.kid, job.key);
      keys.push([job.kid, job.key]);
    }
    const batch = this.nextBatch++;
    running.worker.postMessage({ batch, alg, keys, kids: jobs.map((j) => j.kid), inputs: jobs.map((j) => j.input) } satisfies BatchMessage);
    if (running.owed.size === 0) running.worker.ref();
    return new Promise((resolve, reject) => running.owed.set(batch, { alg, jobs, resolve, reject }));
  }

  private start(): RunningWorker {
    const worker = this.startWorker();
    const running: RunningWorker = { worker, keys: new Map(), owed: new Map() };
    worker.on('message', (reply: ReplyMessage) => {
      const owed = running.owed.get(reply.batch);
      if (!owed) return;
      running.owed.delete(reply.batch);
      if (running.owed.size === 0) worker.unref();
      if ('error' in reply) owed.reject(new Error(`${owed.alg} signing failed: ${reply.error}`));
      else owed.resolve(new Map(owed.jobs.map((job, i) => [job, `${job.input}.${reply.signatures[i]}`])));
    });
    // 'error' (an uncaught exception) is followed by 'exit'; a worker that fails to start may give 'error' alone.
    const stopped = (error: Error) => {
      if (this.running === running) this.fallBack(error); // else closed, or already handled
    };
    worker.on('error', stopped);
    worker.on('exit', (code) => stopped(new Error(`the signing worker exited with code ${code}`)));
    return running;
  }

  /** Signs without the worker for good from now on: the batches it owed fail (and are signed without it, one by one), and `onStop` is told why. */
  private fallBack(error: Error): void {
    void this.stopUsingWorker(error);
    this.onStop(error);
  }

  /**
   * Signs without the worker for good: the batches it still owes fail with `error` at once (the
   * Coalescers sign each of their jobs again, alone), and it is stopped.
   */
  private async stopUsingWorker(error: Error): Promise<void> {
    this.noWorker = true;
    const running = this.running;
    this.running = undefined;
    if (!running) return;
    for (const owed of running.owed.values()) owed.reject(error);
    running.owed.clear();
    await running.worker.terminate();
  }
}

/** Signs `jobs` without the worker: ES256 on this thread, RS256 on the thread pool; fails when one cannot be signed. */
async function signWithoutWorker(alg: SigningAlg, jobs: Job[]): Promise<Map<Job, string>> {
  const signOne: (job: Job) => string | Promise<string> =
    alg === 'ES256' ? (job) => signEs256(job.input, job.key) : (job) => signRs256(job.input, job.key);
  try {
    // An ES256 failure throws from map, an RS256 one rejects Promise.all: both land in the catch.
    const jwts = await Promise.all(jobs.map(signOne));
    return new Map(jobs.map((job, i) => [job, jwts[i]!]));
  } catch (error) {
    throw new Error(`${alg} signing failed: ${(error as Error).message}`);
  }
}
