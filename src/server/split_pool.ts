/**
 * split_pool: runs split tasks on worker threads (split_worker.ts), one task per worker at a
 * time. Two users: `aria split` (workerRunner: measure and rewrite partitions; the executor bounds
 * concurrency to the pool size) and the server's admin app (planRunner: plan and compare volume
 * tables, so the event loop only moves bytes; the app's gate bounds the jobs in flight).
 * `close()` terminates the workers.
 */
import type { PlanAnswer, PlanWork, Planner } from "../admin/mod.ts";
import { ADMIN_PLAN_WORKERS_MAX } from "../constants.ts";
import type { MeasureResult, TaskRunner } from "../split/executor.ts";
import type { SplitTaskResult } from "../split/rewrite_files.ts";
import { runtime } from "../runtime/mod.ts";
import type { SplitWorkerRequest } from "./split_worker.ts";

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
  const pool = workerPool(count);
  pool.start();
  return {
    measure: (task) => pool.run<MeasureResult>({ id: 0, dataDir, kind: "measure", task }),
    split: (task) => pool.run<SplitTaskResult>({ id: 0, dataDir, kind: "split", task }),
    close: pool.close,
  };
}

/**
 * A Planner over `count` worker threads, started at its first job (a server that never plans
 * spends no thread on it). The job's arrays and the answer's bytes are transferred, not copied.
 */
export function planRunner(count: number): Planner & { close(): void } {
  const pool = workerPool(count);
  return {
    concurrency: count,
    run: (work: PlanWork) => {
      pool.start();
      const transfer: ArrayBuffer[] = [];
      if ("packed" in work.input)
        transfer.push(
          work.input.packed.bytes.buffer as ArrayBuffer,
          work.input.packed.messages.buffer as ArrayBuffer,
        );
      return pool.run<PlanAnswer>({ id: 0, kind: "plan", task: work }, transfer);
    },
    close: pool.close,
  };
}

/**
 * The admin app's planner: ADMIN_PLAN_WORKERS_MAX threads at most, and one core left to the event
 * loop (a 2-core machine plans on one thread).
 */
export function adminPlanner(): Planner & { close(): void } {
  return planRunner(
    Math.min(ADMIN_PLAN_WORKERS_MAX, Math.max(1, navigator.hardwareConcurrency - 1)),
  );
}

/** `count` worker threads, each running one request at a time. */
function workerPool(count: number) {
  type Slot = { worker: Worker; task: Pending | null; dead: boolean };
  const idle: Slot[] = [];
  const waiting: { resolve: (slot: Slot) => void; reject: (error: Error) => void }[] = [];
  const all: Slot[] = [];
  let alive = count;
  let closed = false;
  let started = false;
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
  const spawn = () => {
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
  };
  const acquire = () =>
    new Promise<Slot>((resolve, reject) => {
      if (alive === 0 || closed) return reject(noWorkers());
      const slot = idle.pop();
      if (slot !== undefined) resolve(slot);
      else waiting.push({ resolve, reject });
    });
  return {
    start: () => {
      if (started || closed) return;
      started = true;
      for (let i = 0; i < count; i++) spawn();
    },
    run: async <T>(request: SplitWorkerRequest, transfer: ArrayBuffer[] = []): Promise<T> => {
      const slot = await acquire();
      return new Promise<T>((resolve, reject) => {
        slot.task = { resolve: resolve as (value: unknown) => void, reject };
        slot.worker.postMessage(request, transfer);
      });
    },
    close: () => {
      closed = true;
      for (const slot of all) slot.worker.terminate();
      for (const next of waiting.splice(0)) next.reject(noWorkers());
    },
  };
}
