import { defineConfig } from 'vitest/config';

// `npm run test:faults` (issue 11): real faults against real server processes — kill -9 under load,
// WORKERS=2 worker and primary kills, a private PostgreSQL stopped and restarted, SMTP down and up, a
// held SQLite write lock. On SQLite, and again on PostgreSQL when TEST_DATABASE_URL is set. One file
// at a time: the faults need the machine's cores for the load they measure.
const dialects = ['sqlite', ...(process.env.TEST_DATABASE_URL ? ['postgres'] : [])];

export default defineConfig({
  test: {
    pool: 'forks',
    fileParallelism: false,
    testTimeout: 120_000,
    hookTimeout: 60_000,
    include: ['test/faults/**/*.test.ts'],
    projects: dialects.map((dialect) => ({
      extends: true,
      test: {
        name: `faults-${dialect}`,
        env: { TEST_DIALECT: dialect },
        exclude: [dialect === 'postgres' ? 'test/faults/**/*.sqlite.test.ts' : 'test/faults/**/*.pg.test.ts'],
      },
    })),
  },
});
