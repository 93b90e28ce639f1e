/**
 * Runs one async task per item with a bounded number in flight: the uploads,
 * deletions and hashing of `push`.
 */

/**
 * Calls `task` for each item, at most `concurrency` at once, in order of the items. Once
 * `stopped()` is true no new task starts; the ones in flight finish. The first task that
 * throws stops the others from starting and its error is rethrown after they finish.
 */
export async function forEachLimited<T>(
  items: readonly T[],
  concurrency: number,
  task: (item: T) => Promise<void>,
  stopped: () => boolean = () => false,
): Promise<void> {
  let next = 0;
  let failure: { error: unknown } | null = null;
  const worker = async (): Promise<void> => {
    while (next < items.length && failure === null && !stopped()) {
      const item = items[next++];
      try {
        await task(item);
      } catch (error) {
        failure ??= { error };
      }
    }
  };
  await Promise.all(Array.from({ length: Math.max(1, Math.min(concurrency, items.length)) }, worker));
  if (failure !== null) throw (failure as { error: unknown }).error;
}
