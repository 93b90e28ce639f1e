/**
 * A chunk of output kept after its sink released it. A read thread's chunks past its first come
 * in a ring of slots in shared memory, reused once released (reads/read-protocol.ts); any other
 * chunk's bytes are its own.
 */

/** `data` to keep after its release: itself if its bytes are its own, else a copy. */
export function keptChunk(data: Uint8Array): Uint8Array {
  return data.buffer instanceof SharedArrayBuffer ? new Uint8Array(data) : data;
}
