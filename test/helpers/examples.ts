import { spawn, type ChildProcess } from 'node:child_process';

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
