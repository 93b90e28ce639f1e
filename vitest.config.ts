import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/global-setup.ts'],
    // Every response a suite receives through fetch is checked against the OpenAPI document, and
    // each test ends with a turn of the event loop (yield-setup.ts says why).
    setupFiles: ['test/helpers/contract-setup.ts', 'test/helpers/yield-setup.ts'],
    pool: 'forks',
    testTimeout: 60_000,
    hookTimeout: 180_000,
  },
});
