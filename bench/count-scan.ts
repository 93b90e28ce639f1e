/**
 * grep's count mode over texts held in memory, through the scan that picks RE2 or V8
 * (engine/guarded-scan.ts): what bench/grep-engines.ts and bench/grep-hostile.ts time.
 */
import { GuardedScan, scanCounts } from '../engine/guarded-scan.js';
import { LineMatcher } from '../engine/line-matcher.js';
import { compilePattern } from '../engine/regex/pattern.js';
import { lineStarts } from '../test/helpers/line-starts.js';

/** One document: its bytes and line starts. */
export interface ScanText {
  bytes: Buffer;
  starts: Uint32Array;
}

/** `bytes` with its line starts. */
export function scanText(bytes: Buffer): ScanText {
  return { bytes, starts: lineStarts(bytes) };
}

/**
 * Matching lines of every text, the time taken (pattern compiled included), the engine the scan
 * ended on, and whether a V8 batch was stopped at its limit.
 */
export function countScan(pattern: string, texts: readonly ScanText[]): { lines: number; ms: number; engine: string; stopped: boolean } {
  const stoppedBefore = scanCounts.stopped;
  const started = performance.now();
  const matcher = new LineMatcher(compilePattern(pattern));
  const guarded = new GuardedScan(
    matcher,
    texts.map((t) => ({ textBytes: t.bytes.byteLength })),
    {}, // every scan has its own trials
  );
  let lines = 0;
  for (let i = 0; i < texts.length; ) {
    i = guarded.run(
      i,
      (k) => {
        let n = 0;
        matcher.begin(texts[k].bytes, texts[k].starts);
        while (matcher.next()) n += matcher.last - matcher.first + 1;
        return n;
      },
      (_k, n) => {
        lines += n;
      },
    );
  }
  return { lines, ms: performance.now() - started, engine: guarded.engine, stopped: scanCounts.stopped > stoppedBefore };
}
