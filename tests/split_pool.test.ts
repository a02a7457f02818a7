/**
 * The split's worker pool when a worker dies: the task it ran fails (not every task), the pool
 * goes on with the workers left, and once none is left every task fails: nothing waits for ever.
 */
import { expect, test } from "bun:test";
import type { MeasureTask } from "../src/split/executor.ts";
import { runtime } from "../src/runtime/mod.ts";
import { workerRunner } from "../src/server/mod.ts";

/** A runner whose workers run `fixture` (tests/fixtures/…) instead of the split worker. */
function runnerOf(fixture: string, count: number) {
  const original = runtime.spawnWorker;
  (runtime as { spawnWorker: (url: string) => Worker }).spawnWorker = () =>
    new Worker(new URL(`./fixtures/${fixture}`, import.meta.url).href);
  try {
    return workerRunner("/nonexistent", count);
  } finally {
    (runtime as { spawnWorker: (url: string) => Worker }).spawnWorker = original;
  }
}

const task = { partition: "a/b", files: [] } as unknown as MeasureTask;
const outcome = (promise: Promise<unknown>) =>
  Promise.race([
    promise.then(
      () => "resolved",
      (error: Error) => `rejected: ${error.message}`,
    ),
    Bun.sleep(5000).then(() => "pending after 5 s"),
  ]);

for (const [fixture, what] of [
  ["dying_worker.ts", "ends on its task without an error event"],
  ["bad_worker.ts", "fails to load"],
] as const) {
  test(`a worker that ${what} fails its task, and with none left the next task fails at once`, async () => {
    const runner = runnerOf(fixture, 1);
    try {
      expect(await outcome(runner.measure(task))).toMatch(/^rejected: split worker failed/);
      expect(await outcome(runner.measure(task))).toMatch(
        /^rejected: split: no worker thread is left/,
      );
    } finally {
      runner.close();
    }
  });
}
