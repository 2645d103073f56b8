import { spawn, type ChildProcess } from 'node:child_process';
import { buildTestApp, type TestApp } from './app.js';
import { appBody, bearer, createDeveloperViaApi } from './dev-api.js';
import { freePort } from './processes.js';

/**
 * Starts an example server under examples/ (docs/quickstart/) with `env` added to this process's, and
 * waits for its "listening on URL" line: the process and the URL it printed.
 */
export async function startExampleServer(script: string, env: Record<string, string>): Promise<{ process: ChildProcess; url: string }> {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env } });
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    child.stdout!.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /listening on (\S+)/.exec(output);
      if (match) resolve(match[1]!);
    });
    child.on('exit', (code) => reject(new Error(`${script} exited (${code}) before listening`)));
  });
  return { process: child, url };
}

/**
 * A Gatehouse listening on loopback at its own BASE_URL (the issuer an example discovers), with one app
 * its developer registered over the developer API and, when `person` is given, that person registered to it.
 */
export async function listeningWithApp(
  app: Record<string, unknown>,
  options: { env?: Record<string, string>; person?: { email: string; password: string } } = {},
): Promise<{ t: TestApp; base: string; client: { id: string; client_secret?: string } }> {
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const t = await buildTestApp({ env: { BASE_URL: base, ...options.env } });
  await t.app.listen({ port, host: '127.0.0.1' });
  const developer = await createDeveloperViaApi(t);
  const created = await t.app.inject({ method: 'POST', url: '/v1/dev/apps', headers: bearer(developer.apiKey), payload: appBody(app) });
  if (created.statusCode !== 201) throw new Error(`app: ${created.statusCode} ${created.body}`);
  const client = created.json() as { id: string; client_secret?: string };
  if (options.person) {
    const payload = { ...options.person, client_id: client.id, ...(client.client_secret ? { client_secret: client.client_secret } : {}) };
    const registered = await t.app.inject({ method: 'POST', url: '/v1/auth/register', payload });
    if (registered.statusCode !== 201) throw new Error(`register: ${registered.statusCode} ${registered.body}`);
  }
  return { t, base, client };
}
