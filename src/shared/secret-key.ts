import { randomBytes } from 'node:crypto';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Config, ResolvedConfig } from '../config.js';

/**
 * Development convenience (docs/guides/run-and-test.md#run-it): without SECRET_KEY, a key is generated once into the data
 * directory and reused on later starts. Production refuses to start without SECRET_KEY (config.ts).
 */
export function resolveSecretKey(config: Config, warn: (msg: string) => void): ResolvedConfig {
  if (config.secretKey) return config as ResolvedConfig;
  const file = join(config.dataDir, 'secret.key');
  let key: string;
  try {
    key = readFileSync(file, 'utf8').trim();
  } catch {
    mkdirSync(config.dataDir, { recursive: true });
    key = randomBytes(32).toString('base64url');
    writeFileSync(file, `${key}\n`, { mode: 0o600, flag: 'wx' });
    warn(`SECRET_KEY is not set: generated a development key into ${file}. Set SECRET_KEY in production.`);
  }
  return Object.freeze({ ...config, secretKey: key });
}
