/**
 * compiler_priority: puts JavaScriptCore's optimizing-compiler threads ("JITWorker") of this
 * process in Linux's idle scheduling class (SCHED_IDLE), so that compiling hot code — one DFG or
 * FTL compile kept a core busy for 100 ms — runs only on CPU time nothing else wants. On this
 * project's two-core machine the compiler at the event loop's priority took one core while the
 * server's and its clients' event loops shared the other: each such compile was a burst of
 * publish→deliver latency (docs/benchmarks.md, server, session 9). The idle class rather than
 * nice 19: the scheduler treats a core running only idle-class threads as free when it places a
 * waking thread, so an event loop preempts the compiler at once (nice 19 measured no better than
 * nothing). HotSpot's CompilerThreadPriority is the same knob.
 *
 * Linux only (thread ids from /proc/self/task, sched_setscheduler(2) through Bun's FFI on libc):
 * the engine starts and ends its compiler threads on its own, so a timer looks for new ones every
 * CHECK_INTERVAL_MS; where /proc, libc or FFI is missing this does nothing (it is advice).
 */
import { readFileSync, readdirSync } from "node:fs";

const CHECK_INTERVAL_MS = 100;
/** Thread names (comm, at most 15 bytes) of JavaScriptCore's JIT compiler threads. */
const COMPILER_THREAD = "JITWorker";
const SCHED_IDLE = 5;
/** Looks at a thread that is not (yet) named a compiler thread before it is left alone. */
const LOOKS = 2;

/** Moves thread `tid` to the idle class; true when it did. */
export type SetIdle = (tid: number) => boolean;

/** sched_setscheduler(2) from libc, or null where it cannot be loaded (not Linux, no FFI). */
function loadSetIdle(): SetIdle | null {
  if (process.platform !== "linux") return null;
  try {
    const { dlopen, FFIType } = require("bun:ffi") as typeof import("bun:ffi");
    const libc = dlopen("libc.so.6", { sched_setscheduler: { args: [FFIType.i32, FFIType.i32, FFIType.ptr], returns: FFIType.i32 } });
    const param = new Int32Array(1); // struct sched_param { int sched_priority = 0 }
    return (tid) => libc.symbols.sched_setscheduler(tid, SCHED_IDLE, param) === 0;
  } catch {
    return null;
  }
}

/**
 * Lowers the compiler threads present now. `looks` (kept between calls) counts how often each
 * live thread was looked at: a thread is named just after it starts, so any other thread is looked
 * at twice, a compiler thread until it is lowered; ended threads are forgotten.
 */
export function lowerCompilerThreads(setIdle: SetIdle, looks: Map<number, number>, taskDir = "/proc/self/task"): void {
  let names: string[];
  try {
    names = readdirSync(taskDir);
  } catch {
    return;
  }
  const alive = new Set<number>();
  for (const name of names) {
    const tid = Number(name);
    alive.add(tid);
    const seen = looks.get(tid) ?? 0;
    if (seen >= LOOKS) continue;
    let comm: string;
    try {
      comm = readFileSync(`${taskDir}/${name}/comm`, "latin1").trimEnd();
    } catch {
      continue; // the thread ended meanwhile
    }
    if (comm !== COMPILER_THREAD) looks.set(tid, seen + 1);
    else if (setIdle(tid)) looks.set(tid, LOOKS);
  }
  for (const tid of looks.keys()) if (!alive.has(tid)) looks.delete(tid);
}

let started = false;

/** Keeps this process's compiler threads in the idle class from now on (an unref'd timer); once per process. */
export function lowerCompilerPriority(): void {
  if (started) return;
  started = true;
  const setIdle = loadSetIdle();
  if (setIdle === null) return;
  const looks = new Map<number, number>();
  lowerCompilerThreads(setIdle, looks);
  const timer = setInterval(() => lowerCompilerThreads(setIdle, looks), CHECK_INTERVAL_MS);
  timer.unref();
}
