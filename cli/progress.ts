/**
 * Progress bars on stderr, drawn only when stderr is a terminal: a script
 * that captures stderr, or a CI log, gets no carriage-return noise.
 */
import { SingleBar } from 'cli-progress';

/** One phase's progress. */
export interface Bar {
  /** Counts `n` more items done; `note` (e.g. ", 12 uploaded") is shown after the count until changed. */
  increment(n?: number, note?: string): void;
  /** Sets how many items are done. */
  update(done: number): void;
  /** Draws the final state and leaves the line. */
  stop(): void;
}

/** Starts a bar for a phase of `total` items, labelled e.g. "uploading". */
export type StartBar = (label: string, total: number) => Bar;

const NONE: Bar = { increment: () => {}, update: () => {}, stop: () => {} };

/** Bars on `stream` when `enabled` (the caller passes `stream.isTTY`), else bars that draw nothing. */
export function progressBars(stream: NodeJS.WriteStream, enabled: boolean): StartBar {
  if (!enabled) return () => NONE;
  return (label, total) => {
    const bar = new SingleBar({
      stream,
      format: `${label.padEnd(9)} [{bar}] {value}/{total} files{note} | {percentage}% | {duration_formatted} | ETA {eta_formatted}`,
      barCompleteChar: '#',
      barIncompleteChar: '-',
      // The cursor stays: a push interrupted with Ctrl-C would leave the terminal without one.
      hideCursor: false,
      etaBuffer: 100,
    });
    bar.start(total, 0, { note: '' });
    return {
      increment: (n = 1, note?: string) => bar.increment(n, note === undefined ? {} : { note }),
      update: (done) => bar.update(done),
      stop: () => bar.stop(),
    };
  };
}
