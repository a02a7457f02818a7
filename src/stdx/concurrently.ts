/**
 * concurrently: bounded concurrency for async work over a list (disk reads of many partitions,
 * segment writes of a sort batch), so a long list never puts every operation in flight at once.
 */

/**
 * Runs `task(i)` for every i in [0, count), at most `limit` at a time, started in order of i. A
 * failure stops only the worker it happened in; the others finish the list. Returns once every
 * task settled, throwing the first failure (no task is left running).
 */
export async function forEachConcurrently(
  count: number,
  limit: number,
  task: (i: number) => Promise<void>,
): Promise<void> {
  let next = 0;
  const worker = async () => {
    while (next < count) await task(next++);
  };
  const results = await Promise.allSettled(Array.from({ length: Math.min(limit, count) }, worker));
  for (const result of results) if (result.status === "rejected") throw result.reason;
}
