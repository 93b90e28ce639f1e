/**
 * One real PostgreSQL cluster for the whole test run (the same embedded
 * cluster the service starts by default); each test file provisions its own
 * database and roles in it. Tests that run the service as a process run the
 * compiled one, as `npm start` does: it is built here first.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { TestProject } from 'vitest/node';
import { EmbeddedCluster } from '../db/embedded-postgres.js';
import { buildService } from '../service/script-args.js';
import { provideSwift } from './helpers/swift.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgSuperuser: { host: string; port: number; user: string };
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  buildService();
  const dir = await mkdtemp(join(tmpdir(), 'vfs-test-pg-'));
  const cluster = await EmbeddedCluster.start(dir);
  project.provide('pgSuperuser', cluster.address);
  // npm test's third pass keeps the services' originals on a real S3 server (test/helpers/service.ts).
  const stopSwift = process.env.VFS_TEST_STORAGE === 's3' ? await provideSwift(project) : null;
  return async () => {
    await stopSwift?.();
    await cluster.stop();
    await rm(dir, { recursive: true, force: true });
  };
}
