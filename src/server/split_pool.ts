/**
 * split_pool: runs split tasks on worker threads (split_worker.ts), one task per worker
 * at a time; the executor bounds concurrency to the pool size. `close()` terminates the workers.
 */
import type { MeasureResult, MeasureTask, TaskRunner } from "../split/executor.ts";
import type { SplitTask, SplitTaskResult } from "../split/rewrite_files.ts";
import { runtime } from "../runtime/mod.ts";

type Pending = { resolve: (value: unknown) => void; reject: (error: Error) => void };

/** The worker's entry: inside the compiled binary, the path scripts/build.ts gave it; else the file. */
function workerEntry(): string {
  return import.meta.url.includes("$bunfs")
    ? "./src/server/split_worker.ts"
    : new URL("./split_worker.ts", import.meta.url).href;
}

/**
 * A TaskRunner over `count` worker threads working in `dataDir`. A worker that fails (an error
 * event, or it ends: `process.exit` in it, a crash) fails the task it was running, only that one,
 * and leaves the pool; once none is left every waiting and later task fails. (Before, an error
 * failed every worker's task, and a worker that ended without one, or failed before its first
 * task, left the split waiting for ever.)
 */
export function workerRunner(dataDir: string, count: number): TaskRunner & { close(): void } {
  type Slot = { worker: Worker; task: Pending | null; dead: boolean };
  const idle: Slot[] = [];
  const waiting: { resolve: (slot: Slot) => void; reject: (error: Error) => void }[] = [];
  const all: Slot[] = [];
  let alive = count;
  let closed = false;
  const noWorkers = () => new Error("split: no worker thread is left (each failed)");
  const release = (slot: Slot) => {
    const next = waiting.shift();
    if (next !== undefined) next.resolve(slot);
    else idle.push(slot);
  };
  const die = (slot: Slot, why: string) => {
    if (slot.dead) return;
    slot.dead = true;
    alive--;
    const at = idle.indexOf(slot);
    if (at >= 0) idle.splice(at, 1);
    const task = slot.task;
    slot.task = null;
    task?.reject(new Error(`split worker failed: ${why}`));
    slot.worker.terminate();
    if (alive === 0) for (const next of waiting.splice(0)) next.reject(noWorkers());
  };
  for (let i = 0; i < count; i++) {
    const slot: Slot = { worker: runtime.spawnWorker(workerEntry()), task: null, dead: false };
    slot.worker.onmessage = (
      event: MessageEvent<{ ok: boolean; result?: unknown; error?: string }>,
    ) => {
      const reply = event.data;
      const task = slot.task;
      slot.task = null;
      if (task !== null) {
        if (reply.ok) task.resolve(reply.result);
        else task.reject(new Error(reply.error));
      }
      if (!slot.dead) release(slot);
    };
    slot.worker.onerror = (event) => die(slot, event.message);
    slot.worker.addEventListener("close", () => {
      if (!closed) die(slot, "its thread ended");
    });
    all.push(slot);
    idle.push(slot);
  }
  const acquire = () =>
    new Promise<Slot>((resolve, reject) => {
      if (alive === 0) return reject(noWorkers());
      const slot = idle.pop();
      if (slot !== undefined) resolve(slot);
      else waiting.push({ resolve, reject });
    });
  const run = async <T>(kind: "measure" | "split", task: MeasureTask | SplitTask): Promise<T> => {
    const slot = await acquire();
    return new Promise<T>((resolve, reject) => {
      slot.task = { resolve: resolve as (value: unknown) => void, reject };
      slot.worker.postMessage({ id: 0, dataDir, kind, task });
    });
  };
  return {
    measure: (task) => run<MeasureResult>("measure", task),
    split: (task) => run<SplitTaskResult>("split", task),
    close: () => {
      closed = true;
      for (const slot of all) slot.worker.terminate();
    },
  };
}
