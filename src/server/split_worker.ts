/**
 * split_worker: the worker-thread entry of `aria split` and of the admin app's planning (compiled
 * into the binary by scripts/build.ts). One message = one task: measure a partition's volumes,
 * rewrite it into its new stores (src/split/rewrite_files.ts) on the real files of the data
 * directory, or plan a volume table for the admin app (src/admin/plan_work.ts, the answer's bytes
 * transferred back). Answers `{id, ok, result}` or `{id, ok: false, error}`; holds no state between
 * tasks.
 *
 * Why here and not in src/split/: an entry point is an edge, like main.ts — it binds the
 * runtime's disk and CRC-32 to the split's pure tasks, so it must import src/runtime/, which the
 * split (pure) may not. It sits beside split_pool.ts, the only code that starts it.
 */
import { runPlanWork, type PlanWork } from "../admin/mod.ts";
import { runtime } from "../runtime/mod.ts";
import { runMeasureTask, runSplitTask, type SplitTask } from "../split/rewrite_files.ts";
import type { MeasureTask } from "../split/executor.ts";

/** A request to a split worker. */
export type SplitWorkerRequest = { id: number } & (
  | { kind: "measure"; dataDir: string; task: MeasureTask }
  | { kind: "split"; dataDir: string; task: SplitTask }
  | { kind: "plan"; task: PlanWork }
);

declare const self: {
  onmessage: ((event: MessageEvent<SplitWorkerRequest>) => void) | null;
  postMessage(message: unknown, transfer?: Transferable[]): void;
};

self.onmessage = (event) => {
  const request = event.data;
  if (request.kind === "plan") {
    try {
      const result = runPlanWork(request.task);
      self.postMessage({ id: request.id, ok: true, result }, [result.body.buffer]);
    } catch (error) {
      self.postMessage({ id: request.id, ok: false, error: (error as Error).message });
    }
    return;
  }
  const disk = runtime.openDisk(request.dataDir);
  const work =
    request.kind === "measure"
      ? runMeasureTask(disk, request.task, { crc32: runtime.crc32 })
      : runSplitTask(disk, request.task, { crc32: runtime.crc32 });
  work.then(
    (result) => self.postMessage({ id: request.id, ok: true, result }),
    (error: Error) => self.postMessage({ id: request.id, ok: false, error: error.message }),
  );
};
