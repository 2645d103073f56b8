import { spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';

/**
 * The module rule (docs/architecture/modules.md), enforced by dependency-cruiser with the repository's
 * `.dependency-cruiser.cjs`: the sources follow it, and a forbidden import planted in a tree of its own
 * is reported under the rule it breaks (while the allowed import beside it is not).
 */

const ROOT = resolve(import.meta.dirname, '../..');
const CONFIG = join(ROOT, '.dependency-cruiser.cjs');
const DEPCRUISE = join(ROOT, 'node_modules', 'dependency-cruiser', 'bin', 'dependency-cruise.mjs');

function cruise(cwd: string, paths: string[]) {
  const run = spawnSync(process.execPath, [DEPCRUISE, '--config', CONFIG, '--output-type', 'err-long', ...paths], { cwd, encoding: 'utf8' });
  return { status: run.status, output: `${run.stdout}${run.stderr}` };
}

describe('module boundaries (dependency-cruiser)', () => {
  it('the sources and migrations follow the rule', () => {
    const { status, output } = cruise(ROOT, ['src', 'migrations']);
    expect(output).toContain('no dependency violations found');
    expect(status).toBe(0);
  });

  it('a planted forbidden import fails, named by its rule; an import through a public face passes', () => {
    const dir = mkdtempSync(join(tmpdir(), 'gh-boundaries-'));
    try {
      const files: Record<string, string> = {
        'tsconfig.json': JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', strict: true }, include: ['src', 'migrations'] }),
        'src/dev/service.ts': 'export const createApp = () => 1;\n',
        'src/dev/index.ts': "export { createApp } from './service.js';\n",
        'src/shared/planted.ts': "import { createApp } from '../dev/service.js';\nexport const planted = createApp;\n",
        'src/pages/planted.ts': "import { createApp } from '../dev/service.js';\nexport const planted = createApp;\n",
        'src/pages/allowed.ts': "import { createApp } from '../dev/index.js';\nexport const allowed = createApp;\n",
        'src/tokens/planted.ts': "import { createApp } from '../dev/index.js';\nexport const planted = createApp;\n",
        'migrations/2099-01-01T0000_planted.ts': "import { createApp } from '../src/dev/index.js';\nexport const up = createApp;\n",
      };
      for (const [path, content] of Object.entries(files)) {
        mkdirSync(dirname(join(dir, path)), { recursive: true });
        writeFileSync(join(dir, path), content);
      }
      const { status, output } = cruise(dir, ['src', 'migrations']);
      expect(status).not.toBe(0);
      expect(output).toMatch(/core-uses-core-only: src\/shared\/planted\.ts → src\/dev\/service\.ts/);
      expect(output).toMatch(/features-meet-through-public-faces: src\/pages\/planted\.ts → src\/dev\/service\.ts/);
      expect(output).toMatch(/services-use-core-and-services: src\/tokens\/planted\.ts → src\/dev\/index\.ts/);
      expect(output).toMatch(/migrations-are-frozen: migrations\/2099-01-01T0000_planted\.ts → src\/dev\/index\.ts/);
      expect(output).not.toContain('src/pages/allowed.ts');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
