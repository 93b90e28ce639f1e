/**
 * Where a command's result goes: stdout, as text for people or, with `--json`,
 * as JSON for scripts (one document, or one object per line for lists).
 * Diagnostics and progress never go here, so stdout stays parseable.
 */

/** A command's result channel. */
export interface Output {
  /** True with `--json`. */
  readonly json: boolean;
  /** Writes one line (a newline is added). */
  line(text: string): void;
  /** Writes text as it is, byte for byte (a read tool's answer). */
  raw(chunk: string | Uint8Array): Promise<void>;
}

/** The output of a process: stdout, waiting for it to drain so that a large answer piped to `head` does not pile up in memory. */
export function stdoutOutput(json: boolean): Output {
  const write = (chunk: string | Uint8Array): Promise<void> =>
    new Promise((resolve, reject) => {
      if (process.stdout.write(chunk)) return resolve();
      const onDrain = () => {
        process.stdout.off('error', onError);
        resolve();
      };
      const onError = (error: Error) => {
        process.stdout.off('drain', onDrain);
        reject(error);
      };
      process.stdout.once('drain', onDrain);
      process.stdout.once('error', onError);
    });
  return {
    json,
    line: (text) => {
      process.stdout.write(text + '\n');
    },
    raw: write,
  };
}
