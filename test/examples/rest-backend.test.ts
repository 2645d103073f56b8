import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TestApp } from '../helpers/app.js';
import { listeningWithApp } from '../helpers/examples.js';

/**
 * The REST backend quickstart (docs/quickstart/rest-backend.md) runs as written, against a started
 * server: examples/rest-backend/index.mjs as a child process, configured only by its environment.
 */
describe('quickstart: an app backend over REST', () => {
  let t: TestApp;
  let env: Record<string, string>;

  beforeAll(async () => {
    const started = await listeningWithApp({ name: 'Quickstart backend', type: 'confidential', features: { auth: true, profile: true } }, { env: { IP_AUTH_PER_MINUTE: '1000' } });
    t = started.t;
    env = { GATEHOUSE_URL: started.base, CLIENT_ID: started.client.id, CLIENT_SECRET: started.client.client_secret! };
  });
  afterAll(async () => t?.close());

  it('registers, signs in, stores a profile, refreshes, reads it back and signs out', async () => {
    const { stdout } = await promisify(execFile)(process.execPath, ['examples/rest-backend/index.mjs'], { env: { ...process.env, ...env }, timeout: 60_000 });
    const lines = stdout.trim().split('\n');
    expect(lines[0]).toMatch(/^registered quickstart\.\d+@example\.com$/);
    expect(lines[1]).toMatch(/^signed in as usr_[0-9a-z]+; access token valid 900 s$/);
    expect(lines.slice(2)).toEqual([
      'profile stored, version 1',
      'refreshed; the refresh token rotated: true',
      'profile read: {"theme":"dark","onboarding":"done"}',
      'signed out: the access token is refused (401 unauthorized)',
    ]);
  });
});
