import { availableParallelism } from 'node:os';
import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Every response a suite receives through fetch is checked against the OpenAPI document, and
    // each test ends with a turn of the event loop (yield-setup.ts says why).
    setupFiles: ['test/helpers/contract-setup.ts', 'test/helpers/yield-setup.ts'],
    pool: 'forks',
    // Most files spend their time waiting on the service processes and servers they start, so
    // two run at once even on two cores (Vitest's default there is one: 8.7 against 5.6 minutes).
    maxWorkers: Math.max(2, availableParallelism() - 1),
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
