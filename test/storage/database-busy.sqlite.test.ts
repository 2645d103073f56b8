import SQLite from 'better-sqlite3';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { createStorage, type Storage } from '../../src/storage/connect.js';
import { testConfig } from '../helpers/app.js';
import { expectAnsweredAtOnce, timeProbeAfterPause } from '../helpers/concurrency.js';
import { makeApp } from '../helpers/factories.js';
import type { FastifyInstance } from 'fastify';

/**
 * Takes the write lock from another connection, retrying without blocking the event loop: the app may
 * be finishing a write of its own just then (the mailer claiming the mail of a registration), and a
 * synchronous wait would keep it from ever committing.
 */
async function lockFromOutside(path: string): Promise<SQLite.Database> {
  const other = new SQLite(path, { timeout: 0 });
  for (;;) {
    try {
      other.exec('BEGIN EXCLUSIVE');
      return other;
    } catch (error) {
      if ((error as { code?: string }).code !== 'SQLITE_BUSY') throw error;
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
  }
}

// SQLite only (`*.sqlite.test.ts`). docs/security/checklist.md#reliability-under-faults-and-concurrency: while another process holds the write lock,
// writes fail closed with 503 + Retry-After after busy_timeout, reads go on, and the process recovers.
describe('SQLite write lock held by another connection', () => {
  let dir: string;
  let storage: Storage;
  let app: FastifyInstance;
  let clientId: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'gh-busy-'));
    const url = `sqlite:${join(dir, 'gatehouse.db')}`;
    storage = createStorage(url);
    app = await buildApp(testConfig({ DATABASE_URL: url }), { storage, logStream: false });
    await app.ready();
    clientId = (await makeApp(storage.db)).id;
  });
  afterAll(async () => {
    await app.close();
    await storage.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const register = (email: string) =>
    app.inject({ method: 'POST', url: '/v1/auth/register', payload: { email, password: 'a long enough passphrase', client_id: clientId } });

  it('answers 503 with Retry-After for a write, keeps serving reads, and works again once the lock is gone', async () => {
    const other = await lockFromOutside(join(dir, 'gatehouse.db'));
    try {
      const blocked = await register('blocked@example.com');
      expect(blocked.statusCode).toBe(503);
      expect(blocked.json()).toEqual({ code: 'service_unavailable', message: expect.any(String) });
      expect(blocked.headers['retry-after']).toBe('5');
      expect(blocked.body).not.toMatch(/SQLITE|busy|locked/i);
      expect((await app.inject('/readyz')).statusCode).toBe(200);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    expect((await register('later@example.com')).statusCode).toBe(201);
    expect((await register('blocked@example.com')).statusCode).toBe(201);
  }, 30_000);

  it('keeps the event loop free while it waits for the lock: /healthz answers at once, and a write waiting less than its budget succeeds', async () => {
    const other = await lockFromOutside(join(dir, 'gatehouse.db'));
    const waiting = register('waited@example.com');
    const healthTimes: number[] = [];
    try {
      // The write above waits for the lock meanwhile; /healthz must not wait with it.
      for (let i = 0; i < 20; i += 1) {
        healthTimes.push(await timeProbeAfterPause(50, async () => expect((await app.inject('/healthz')).statusCode).toBe(200)));
      }
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    // Released after ~1 s, well inside the 5 s budget: the waiting write goes through.
    expect((await waiting).statusCode).toBe(201);
    // A probe waits at most for one BUSY_SLICE_MS attempt; waiting with the write would hold it for seconds.
    expectAnsweredAtOnce(healthTimes, 25);
  }, 30_000);
});
