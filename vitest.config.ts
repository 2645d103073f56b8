import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

// The whole suite runs on SQLite, and again on PostgreSQL when TEST_DATABASE_URL is set.
const dialects = ['sqlite', ...(process.env.TEST_DATABASE_URL ? ['postgres'] : [])];

export default defineConfig({
  test: {
    pool: 'forks',
    // Test files mostly wait (on servers, databases, Chromium, argon2 on the thread pool): at least two
    // at once, even on two cores (vitest's default there is one; the whole suite took twice as long).
    maxWorkers: Math.max(2, availableParallelism()),
    // A worker process runs its test files one after another on the modules it has loaded: loading the
    // sources anew for every file was a third of the suite's time (SQLite: 289 s → 189 s). Every file
    // builds its own app, database and clock (test/helpers/app.ts), so nothing a test can see is shared.
    isolate: false,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    include: ['test/**/*.test.ts'],
    projects: dialects.map((dialect) => ({
      extends: true,
      test: {
        name: dialect,
        env: { TEST_DIALECT: dialect },
        // `*.pg.test.ts` / `*.sqlite.test.ts` test one database's own behaviour: they run with it alone.
        // The fault suite has its own run (`npm run test:faults`, vitest.faults.config.ts).
        exclude: ['test/faults/**', 'node_modules/**', dialect === 'postgres' ? 'test/**/*.sqlite.test.ts' : 'test/**/*.pg.test.ts'],
      },
    })),
  },
});
