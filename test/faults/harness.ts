import { execFileSync, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { TEST_ADMIN_TOKEN } from '../helpers/app.js';
import { freePort, startServer } from '../helpers/processes.js';

/**
 * The fault suite's parts (issue 11): a Gatehouse process, an app provisioned through the public
 * APIs, a mixed write load that remembers every write the service acknowledged, the check that none
 * of them was lost, and a private PostgreSQL instance the suite may stop (never the shared one).
 */

export type Server = Awaited<ReturnType<typeof startServer>> & { url: string };

/** Env every fault-suite server gets: no per-IP limit (the load comes from one address), and a refresh grace long enough to span a restart. */
export const LOAD_ENV = { IP_AUTH_PER_MINUTE: '1000000', REFRESH_REUSE_GRACE: '120', LOG_LEVEL: 'error' };

export async function launch(database: { url: string; dataDir: string }, env: Record<string, string> = {}): Promise<Server> {
  const server = await startServer(database, { ...LOAD_ENV, ...env });
  return { ...server, url: `http://127.0.0.1:${server.port}` };
}

export const isAlive = (server: Server) => server.child.exitCode === null && server.child.signalCode === null;

/** One HTTP call with a deadline; a network failure is returned, not thrown. */
export async function call(url: string, init: RequestInit & { json?: unknown } = {}): Promise<{ status: number | 'network'; body: any; headers: Headers | null; ms: number }> {
  const started = performance.now();
  const headers = new Headers(init.headers);
  if (init.json !== undefined) headers.set('content-type', 'application/json');
  try {
    const res = await fetch(url, { ...init, headers, body: init.json !== undefined ? JSON.stringify(init.json) : init.body, signal: AbortSignal.timeout(15_000) });
    const text = await res.text();
    let body: unknown = text;
    try {
      body = JSON.parse(text);
    } catch {
      // not JSON (a hosted page)
    }
    return { status: res.status, body, headers: res.headers, ms: performance.now() - started };
  } catch {
    return { status: 'network', body: null, headers: null, ms: performance.now() - started };
  }
}

export interface Provisioned {
  developerKey: string;
  /** A public app with Auth and Profile: the load signs users up to it. */
  clientId: string;
  /** A confidential app, for client-secret checks. */
  confidential: { id: string; secret: string };
}

/** A developer (admin API) and two apps (developer API), as an operator would set them up. */
export async function provision(base: string): Promise<Provisioned> {
  const admin = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
  const developer = await call(`${base}/v1/admin/developers`, { method: 'POST', headers: admin, json: { email: `ops-${Date.now()}@example.com`, name: 'Ops' } });
  if (developer.status !== 201) throw new Error(`developer: ${developer.status} ${JSON.stringify(developer.body)}`);
  const developerKey = developer.body.api_key as string;
  const createApp = async (type: 'public' | 'confidential') => {
    const res = await call(`${base}/v1/dev/apps`, {
      method: 'POST',
      headers: { authorization: `Bearer ${developerKey}` },
      json: { name: `Fault ${type}`, redirect_uris: ['https://app.example/cb'], type, features: { auth: true, profile: true }, required_fields: [] },
    });
    if (res.status !== 201) throw new Error(`app: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body as { id: string; client_secret?: string };
  };
  const publicApp = await createApp('public');
  const confidentialApp = await createApp('confidential');
  return { developerKey, clientId: publicApp.id, confidential: { id: confidentialApp.id, secret: confidentialApp.client_secret! } };
}

/** What the service acknowledged for one user: the newest of each kind of write. */
export interface AckedUser {
  email: string;
  password: string;
  userId: string;
  accessToken: string;
  refreshToken: string;
  profileVersion: number;
  profileData: Record<string, unknown> | null;
}

export type StatusCounts = Record<string, number>;

/**
 * A mixed write load: `lanes` clients in parallel, each registering users and, for each, writing its
 * profile and rotating its refresh token in turn. Only answers the client received count as
 * acknowledged; a write whose answer was lost (the process died) may or may not have happened.
 */
export class MixedLoad {
  readonly users: AckedUser[] = [];
  readonly statuses: StatusCounts = {};
  requests = 0;
  acknowledged = 0;
  /** The slowest answer so far, in milliseconds. */
  slowestMs = 0;
  private running = false;
  private lanes: Promise<void>[] = [];
  private serial = 0;

  constructor(
    private base: string,
    private readonly clientId: string,
    private readonly tag: string,
  ) {}

  start(lanes = 6): void {
    this.running = true;
    this.lanes = Array.from({ length: lanes }, (_, lane) => this.lane(lane));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.lanes);
  }

  private count({ status, ms }: { status: number | 'network'; ms: number }): void {
    this.requests += 1;
    this.slowestMs = Math.max(this.slowestMs, Math.round(ms));
    this.statuses[status] = (this.statuses[status] ?? 0) + 1;
    if (typeof status === 'number' && status < 300) this.acknowledged += 1;
  }

  private async lane(lane: number): Promise<void> {
    let user: AckedUser | null = null;
    let step = 0;
    while (this.running) {
      step += 1;
      if (!user || step % 8 === 0) {
        user = await this.register(lane);
        if (!user) await pause(20);
        continue;
      }
      if (step % 2 === 0) await this.writeProfile(user, step);
      else await this.rotate(user);
    }
  }

  private async register(lane: number): Promise<AckedUser | null> {
    this.serial += 1;
    const email = `${this.tag}-${lane}-${this.serial}@example.com`;
    const password = `fault load passphrase ${this.serial}`;
    const res = await call(`${this.base}/v1/auth/register`, { method: 'POST', json: { email, password, client_id: this.clientId } });
    this.count(res);
    if (res.status !== 201) return null;
    const user: AckedUser = {
      email,
      password,
      userId: res.body.user.id,
      accessToken: res.body.access_token,
      refreshToken: res.body.refresh_token,
      profileVersion: 0,
      profileData: null,
    };
    this.users.push(user);
    return user;
  }

  private async writeProfile(user: AckedUser, step: number): Promise<void> {
    const data = { step, note: `written at step ${step}` };
    const res = await call(`${this.base}/v1/profile/${user.userId}`, {
      method: 'PUT',
      headers: { authorization: `Bearer ${user.accessToken}`, 'x-client-id': this.clientId },
      json: { data },
    });
    this.count(res);
    if (res.status === 200) {
      user.profileVersion = res.body.version;
      user.profileData = data;
    }
  }

  private async rotate(user: AckedUser): Promise<void> {
    const res = await call(`${this.base}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: user.refreshToken, client_id: this.clientId } });
    this.count(res);
    if (res.status === 200) {
      user.refreshToken = res.body.refresh_token;
      user.accessToken = res.body.access_token;
    }
  }
}

/** Registers `count` users of `clientId` and writes each one's profile once: the lanes of a {@link SteadyLoad}. */
export async function enrolUsers(base: string, clientId: string, count: number, tag: string): Promise<AckedUser[]> {
  const users: AckedUser[] = [];
  for (let lane = 0; lane < count; lane++) {
    const email = `${tag}-${lane}@example.com`;
    const password = `${tag} restart passphrase ${lane}`;
    const res = await call(`${base}/v1/auth/register`, { method: 'POST', json: { email, password, client_id: clientId } });
    if (res.status !== 201) throw new Error(`register: ${res.status} ${JSON.stringify(res.body)}`);
    const user: AckedUser = { email, password, userId: res.body.user.id, accessToken: res.body.access_token, refreshToken: res.body.refresh_token, profileVersion: 0, profileData: null };
    const profileData = { lane };
    const put = await call(`${base}/v1/profile/${user.userId}`, { method: 'PUT', headers: { authorization: `Bearer ${user.accessToken}`, 'x-client-id': clientId }, json: { data: profileData } });
    if (put.status !== 200) throw new Error(`profile: ${put.status} ${JSON.stringify(put.body)}`);
    users.push({ ...user, profileVersion: put.body.version, profileData });
  }
  return users;
}

export type SteadyKind = 'login' | 'refresh' | 'profile' | 'authorize';

/**
 * A steady load for restart tests: one lane per user, each cycling through `cycle` (refresh grants,
 * bearer profile reads, password logins, hosted authorize page loads) until stopped. Any answer not in
 * `expected` for its kind, or a network failure, is a failure; acknowledged rotations update the user.
 */
export class SteadyLoad {
  requests = 0;
  readonly failures: string[] = [];
  readonly counts: StatusCounts = {};
  private running = true;
  private readonly lanes: Promise<void>[];

  constructor(
    private readonly target: { base: string; clientId: string; authorizeUrl?: string },
    users: AckedUser[],
    private readonly cycle: readonly SteadyKind[],
    private readonly expected: Partial<Record<SteadyKind, number[]>> = {},
  ) {
    this.lanes = users.map((user) => this.lane(user));
  }

  async stop(): Promise<void> {
    this.running = false;
    await Promise.all(this.lanes);
  }

  private record(kind: SteadyKind, res: Awaited<ReturnType<typeof call>>) {
    this.requests += 1;
    const key = `${kind}:${res.status}`;
    this.counts[key] = (this.counts[key] ?? 0) + 1;
    if (res.status === 'network' || !(this.expected[kind] ?? [200]).includes(res.status)) this.failures.push(`${key} ${JSON.stringify(res.body).slice(0, 160)}`);
    return res;
  }

  private async lane(user: AckedUser): Promise<void> {
    const { base, clientId, authorizeUrl } = this.target;
    const bearer = () => ({ authorization: `Bearer ${user.accessToken}`, 'x-client-id': clientId });
    for (let step = 1; this.running; step++) {
      const kind = this.cycle[step % this.cycle.length]!;
      let res: Awaited<ReturnType<typeof call>>;
      if (kind === 'refresh') res = this.record(kind, await call(`${base}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: user.refreshToken, client_id: clientId } }));
      else if (kind === 'login') res = this.record(kind, await call(`${base}/v1/auth/login`, { method: 'POST', json: { email: user.email, password: user.password, client_id: clientId } }));
      else if (kind === 'profile') res = this.record(kind, await call(`${base}/v1/profile/${user.userId}`, { headers: bearer() }));
      else res = this.record(kind, await call(authorizeUrl!, { redirect: 'manual' }));
      // A login issues a new refresh token; the one held before stays valid too.
      if ((kind === 'refresh' || kind === 'login') && res.status === 200) {
        user.refreshToken = res.body.refresh_token;
        user.accessToken = res.body.access_token;
      }
    }
  }
}

export interface VerifyReport {
  users: number;
  lost: string[];
}

/**
 * Every acknowledged write is still there: each registered user signs in with its password; its
 * profile holds at least the acknowledged version (the acknowledged data when no later write may have
 * landed); its newest acknowledged refresh token rotates, and presenting it again inside the grace
 * answers the same successor (one rotation, not two).
 */
export async function verifyAcknowledged(base: string, clientId: string, users: AckedUser[]): Promise<VerifyReport> {
  const lost: string[] = [];
  for (const user of users) {
    const login = await call(`${base}/v1/auth/login`, { method: 'POST', json: { email: user.email, password: user.password, client_id: clientId } });
    if (login.status !== 200) {
      lost.push(`${user.email}: login ${login.status} ${JSON.stringify(login.body)}`);
      continue;
    }
    const profile = await call(`${base}/v1/profile/${user.userId}`, { headers: { authorization: `Bearer ${login.body.access_token}`, 'x-client-id': clientId } });
    if (user.profileVersion > 0) {
      const version = profile.status === 200 ? (profile.body.version as number) : -1;
      if (version < user.profileVersion) lost.push(`${user.email}: profile version ${version} < acknowledged ${user.profileVersion}`);
      else if (version === user.profileVersion && JSON.stringify(profile.body.data) !== JSON.stringify(user.profileData)) lost.push(`${user.email}: profile data differs at version ${version}`);
    }
    const rotate = () => call(`${base}/v1/auth/refresh`, { method: 'POST', json: { refresh_token: user.refreshToken, client_id: clientId } });
    const first = await rotate();
    const again = await rotate();
    if (first.status !== 200) lost.push(`${user.email}: newest refresh token ${first.status} ${JSON.stringify(first.body)}`);
    else if (again.status !== 200 || again.body.refresh_token !== first.body.refresh_token) lost.push(`${user.email}: refresh token rotated twice`);
  }
  return { users: users.length, lost };
}

export const pause = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Prints one line of figures for the fault-suite log (and RELIABILITY.md). */
export function report(name: string, figures: Record<string, unknown>): void {
  console.log(`[faults] ${name}: ${JSON.stringify(figures)}`);
}

/** Polls `check` every `everyMs` until it is true; returns the milliseconds it took (throws after `timeoutMs`). */
export async function until(check: () => Promise<boolean>, timeoutMs: number, everyMs = 50): Promise<number> {
  const started = performance.now();
  while (performance.now() - started < timeoutMs) {
    if (await check()) return performance.now() - started;
    await pause(everyMs);
  }
  throw new Error(`condition not met within ${timeoutMs} ms`);
}

// A private PostgreSQL ------------------------------------------------------------------------------

const PG_BIN = (() => {
  const found = spawnSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1'], { encoding: 'utf8' }).stdout.trim();
  return found || '';
})();

export const havePostgresBinaries = PG_BIN !== '';

/**
 * A PostgreSQL instance of its own (initdb + pg_ctl on a free port, data in a temp directory) that a
 * test may stop and start: the shared instance on 5432 is never touched. PostgreSQL refuses to run as
 * root, so as root it runs as the `postgres` system user.
 */
export class PrivatePostgres {
  readonly dir = mkdtempSync(join(tmpdir(), 'gh-fault-pg-'));
  readonly data = join(this.dir, 'data');
  port = 0;

  get url(): string {
    return `postgres://gatehouse@127.0.0.1:${this.port}/postgres`;
  }

  private run(binary: string, args: string[]): void {
    const command = join(PG_BIN, binary);
    if (process.getuid?.() === 0) execFileSync('runuser', ['-u', 'postgres', '--', command, ...args], { stdio: 'pipe' });
    else execFileSync(command, args, { stdio: 'pipe' });
  }

  async init(): Promise<void> {
    if (process.getuid?.() === 0) chownSync(this.dir, uidOf('postgres'), gidOf('postgres'));
    this.port = await freePort();
    this.run('initdb', ['-D', this.data, '-U', 'gatehouse', '-A', 'trust', '--no-sync', '-E', 'UTF8']);
  }

  start(): void {
    this.run('pg_ctl', ['-D', this.data, '-w', '-t', '30', '-l', join(this.dir, 'log'), '-o', `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c fsync=off`, 'start']);
  }

  /** `pg_ctl stop -m immediate`: every backend dies at once, as in a crash or failover. */
  stopImmediately(): void {
    this.run('pg_ctl', ['-D', this.data, '-w', '-m', 'immediate', 'stop']);
  }

  destroy(): void {
    try {
      this.run('pg_ctl', ['-D', this.data, '-w', '-m', 'immediate', 'stop']);
    } catch {
      // already stopped
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

const uidOf = (user: string) => Number(execFileSync('id', ['-u', user], { encoding: 'utf8' }).trim());
const gidOf = (user: string) => Number(execFileSync('id', ['-g', user], { encoding: 'utf8' }).trim());
