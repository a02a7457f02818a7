/**
 * in_process: the split's host and task runner when everything runs in this process — the host
 * is a Store this process opened (the only user of the data directory), tasks run on the calling
 * thread. Tests use both with a SimDisk; `aria split` uses the host when no server runs.
 */
import type { Crc32, Disk, Store } from "../store/mod.ts";
import type { SplitHost, TaskRunner } from "./executor.ts";
import { runMeasureTask, runSplitTask } from "./rewrite_files.ts";

/** A SplitHost over an open Store. */
export function storeHost(store: Store): SplitHost {
  return {
    layout: async () => store.layout(),
    reserveIds: async (count) => store.reserveIds(count),
    switchLayout: (swap) => store.switchLayout(swap),
    openData: async () => store.openData(),
    seal: () => store.seal(),
  };
}

/** A TaskRunner that runs each task here, on `disk`. */
export function inProcessRunner(
  disk: Disk,
  options: { crc32: Crc32; chunkBytes?: number },
): TaskRunner {
  return {
    measure: (task) => runMeasureTask(disk, task, options),
    split: (task) => runSplitTask(disk, task, options),
  };
}
