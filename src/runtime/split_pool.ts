/**
 * split_pool: runs split tasks on worker threads (src/split/split_worker.ts), one task per worker
 * at a time; the executor bounds concurrency to the pool size. `close()` terminates the workers.
 */
import type { MeasureResult, MeasureTask, TaskRunner } from "../split/executor.ts";
import type { SplitTask, SplitTaskResult } from "../split/rewrite_files.ts";
import { runtime } from "./current_runtime.ts";

type Pending = { resolve: (value: unknown) => void; reject: (error: Error) => void };

/** The worker's entry: inside the compiled binary, the path scripts/build.ts gave it; else the file. */
function workerEntry(): string {
  return import.meta.url.includes("$bunfs") ? "./src/split/split_worker.ts" : new URL("../split/split_worker.ts", import.meta.url).href;
}

/** A TaskRunner over `count` worker threads working in `dataDir`. */
export function workerRunner(dataDir: string, count: number): TaskRunner & { close(): void } {
  const idle: Worker[] = [];
  const waiting: ((worker: Worker) => void)[] = [];
  const pending = new Map<number, Pending>();
  let nextId = 1;
  const all: Worker[] = [];
  for (let i = 0; i < count; i++) {
    const worker = runtime.spawnWorker(workerEntry());
    worker.onmessage = (event: MessageEvent<{ id: number; ok: boolean; result?: unknown; error?: string }>) => {
      const reply = event.data;
      const entry = pending.get(reply.id);
      pending.delete(reply.id);
      release(worker);
      if (entry === undefined) return;
      if (reply.ok) entry.resolve(reply.result);
      else entry.reject(new Error(reply.error));
    };
    worker.onerror = (event) => {
      for (const [id, entry] of pending) {
        pending.delete(id);
        entry.reject(new Error(`split worker failed: ${event.message}`));
      }
    };
    all.push(worker);
    idle.push(worker);
  }
  const release = (worker: Worker) => {
    const next = waiting.shift();
    if (next !== undefined) next(worker);
    else idle.push(worker);
  };
  const acquire = () => new Promise<Worker>((resolve) => {
    const worker = idle.pop();
    if (worker !== undefined) resolve(worker);
    else waiting.push(resolve);
  });
  const run = async <T>(kind: "measure" | "split", task: MeasureTask | SplitTask): Promise<T> => {
    const worker = await acquire();
    const id = nextId++;
    return new Promise<T>((resolve, reject) => {
      pending.set(id, { resolve: resolve as (value: unknown) => void, reject });
      worker.postMessage({ id, dataDir, kind, task });
    });
  };
  return {
    measure: (task) => run<MeasureResult>("measure", task),
    split: (task) => run<SplitTaskResult>("split", task),
    close: () => {
      for (const worker of all) worker.terminate();
    },
  };
}
