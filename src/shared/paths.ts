import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * The repository root (the folder holding package.json), found from this file, so files shipped
 * beside the code (`openapi.yaml`, `views/`) resolve the same from `src/` (tsx) and `dist/src/` (build).
 */
function findProjectRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    const parent = dirname(dir);
    if (parent === dir) throw new Error('package.json not found above the application code');
    dir = parent;
  }
  return dir;
}

export const PROJECT_ROOT = findProjectRoot();
