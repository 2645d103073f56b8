import { buildApp } from '../app.js';
import { parseConfig, type ResolvedConfig } from '../config.js';
import { createStorage } from '../storage/connect.js';

/**
 * The checked-in openapi.yaml: the document of an app built outside production (so the development
 * routes are in it) with the default {base_url}, on an empty in-memory database. `npm run openapi`
 * writes it; test/openapi/document.test.ts regenerates it and fails when the file differs.
 */
export async function generateOpenapiYaml(): Promise<string> {
  const config = parseConfig({
    NODE_ENV: 'development',
    BASE_URL: 'http://localhost:3000',
    DATABASE_URL: 'sqlite::memory:',
    // Any key will do: nothing is encrypted while the document is generated.
    SECRET_KEY: 'openapi-document-generation-only-0123456789',
  }) as ResolvedConfig;
  const storage = createStorage(config.databaseUrl);
  const app = await buildApp(config, { storage, logStream: false });
  try {
    await app.ready();
    return app.openapi().yaml;
  } finally {
    await app.close();
    await storage.close();
  }
}
