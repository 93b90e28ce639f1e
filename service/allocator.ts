/**
 * Giving the allocator's free memory back to the system.
 *
 * glibc's malloc returns a freed block to the system only when it lies at the top of its arena.
 * The threads' arenas hold long-lived blocks (LMDB environments, lmdb-js cursors and buffers,
 * V8's and Node's own) beside short-lived ones, so the freed pages between them stay resident:
 * 51 MB at the end of a 13-minute soak (docs/benchmarks.md, "2026-11-29, later: what glibc
 * keeps, and what lmdb-js never frees"). `malloc_trim(0)` releases every free page of every
 * arena. It is called through koffi (a C foreign-function interface) on a libuv pool thread, so
 * the event loop never waits for it; where the C library has no `malloc_trim` (musl, macOS),
 * nothing is done.
 */
import koffi from 'koffi';
import { everyInTurn } from '../core/every-in-turn.js';

/** Calls `malloc_trim(0)` off the event loop; resolves to whether memory was released. */
type Trim = () => Promise<boolean>;

let loaded: Trim | null | undefined;

/** The process's `malloc_trim`, or null where the C library has none. */
export function allocatorTrim(): Trim | null {
  if (loaded !== undefined) return loaded;
  loaded = null;
  if (process.platform !== 'linux') return loaded;
  try {
    const trim = koffi.load('libc.so.6').func('int malloc_trim(size_t pad)');
    loaded = () =>
      new Promise<boolean>((resolve, reject) => {
        trim.async(0, (error: unknown, released: number) => (error ? reject(error) : resolve(released === 1)));
      });
  } catch {
    // Not glibc: no libc.so.6, or no malloc_trim in it.
  }
  return loaded;
}

/** Trims every `intervalMs` (none when 0 or without `malloc_trim`); returns the function that stops it. */
export function trimAllocatorEvery(intervalMs: number, onError: (error: unknown) => void): () => Promise<void> {
  const trim = allocatorTrim();
  if (trim === null) return async () => {};
  return everyInTurn(() => trim().then(() => {}, onError), intervalMs, false);
}
