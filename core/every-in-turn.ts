/**
 * Background work repeated on a timer, one run at a time: a tick that finds the last run still
 * going is skipped, so runs never overlap nor queue up behind a slow one.
 */

/**
 * Runs `task` now when `atStart`, then every `intervalMs` (never when it is 0 or less) unless a
 * run is in progress. `task` handles its own errors. Returns the function that stops the timer
 * and waits for the run in progress.
 */
export function everyInTurn(task: () => Promise<void>, intervalMs: number, atStart: boolean): () => Promise<void> {
  let running: Promise<void> | null = null;
  const run = (): void => {
    if (running !== null) return;
    running = task().finally(() => {
      running = null;
    });
  };
  if (atStart) run();
  const timer = intervalMs > 0 ? setInterval(run, intervalMs).unref() : null;
  return async () => {
    if (timer !== null) clearInterval(timer);
    await running;
  };
}
