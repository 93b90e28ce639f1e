/**
 * A vitest setup file: the worker's event loop turns between tests. vitest awaits each test, but
 * a file of synchronous tests (a table of ripgrep comparisons) never leaves the microtask queue,
 * so the worker cannot read the main process's answers to its progress reports; after 60 s the
 * report times out ("Timeout calling onTaskUpdate") and the whole run fails, every test passed.
 */
import { afterEach } from 'vitest';

afterEach(() => new Promise<void>((resolve) => setImmediate(resolve)));
