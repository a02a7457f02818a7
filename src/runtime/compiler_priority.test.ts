/**
 * compiler_priority: which threads are moved to the idle class (a fake /proc task directory), and,
 * on Linux, that a process calling lowerCompilerPriority() really runs its JIT threads in it.
 */
import { afterEach, expect, test } from "bun:test";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { lowerCompilerThreads } from "./compiler_priority.ts";

const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

function taskDir(threads: Record<number, string>): string {
  const dir = mkdtempSync(join(tmpdir(), "aria-tasks-"));
  dirs.push(dir);
  for (const [tid, comm] of Object.entries(threads)) addThread(dir, Number(tid), comm);
  return dir;
}

function addThread(dir: string, tid: number, comm: string): void {
  mkdirSync(join(dir, String(tid)), { recursive: true });
  writeFileSync(join(dir, String(tid), "comm"), `${comm}\n`);
}

test("only JITWorker threads are moved, each once while it lives", () => {
  const dir = taskDir({ 100: "aria", 101: "JITWorker", 102: "HeapHelper", 103: "JITWorker", 104: "Bun Pool 0" });
  const moved: number[] = [];
  const looks = new Map<number, number>();
  const setIdle = (tid: number) => {
    moved.push(tid);
    return true;
  };
  lowerCompilerThreads(setIdle, looks, dir);
  expect(moved.sort()).toEqual([101, 103]);
  lowerCompilerThreads(setIdle, looks, dir);
  expect(moved.length).toBe(2);
  // A new compiler thread (the engine started another) is found on the next look.
  addThread(dir, 105, "JITWorker");
  lowerCompilerThreads(setIdle, looks, dir);
  expect(moved.sort()).toEqual([101, 103, 105]);
  // An ended thread is forgotten: its id, reused by a new compiler thread, is moved again.
  rmSync(join(dir, "101"), { recursive: true });
  lowerCompilerThreads(setIdle, looks, dir);
  expect(looks.has(101)).toBe(false);
  addThread(dir, 101, "JITWorker");
  lowerCompilerThreads(setIdle, looks, dir);
  expect(moved.filter((tid) => tid === 101).length).toBe(2);
});

test("a thread named a compiler thread after its first looks is left alone; a failed move is tried again", () => {
  const dir = taskDir({ 200: "Thread", 201: "JITWorker" });
  const looks = new Map<number, number>();
  const attempts: number[] = [];
  let allow = false;
  const setIdle = (tid: number) => {
    attempts.push(tid);
    return allow;
  };
  lowerCompilerThreads(setIdle, looks, dir);
  lowerCompilerThreads(setIdle, looks, dir);
  expect(attempts).toEqual([201, 201]);
  allow = true;
  addThread(dir, 200, "JITWorker"); // renamed after two looks as something else
  lowerCompilerThreads(setIdle, looks, dir);
  lowerCompilerThreads(setIdle, looks, dir);
  expect(attempts).toEqual([201, 201, 201]);
});

test("a missing task directory is no error", () => {
  expect(() => lowerCompilerThreads(() => true, new Map(), "/nonexistent/task")).not.toThrow();
});

test.skipIf(process.platform !== "linux")("in a real process, every JIT compiler thread ends up in the idle class", async () => {
  // A child that calls lowerCompilerPriority(), makes the engine compile hot code, and reports the
  // scheduling policy (field 41 of /proc/self/task/TID/stat; 5 = SCHED_IDLE) of each JITWorker.
  const script = `
    import { readdirSync, readFileSync } from "node:fs";
    import { lowerCompilerPriority } from ${JSON.stringify(join(import.meta.dir, "compiler_priority.ts"))};
    lowerCompilerPriority();
    let x = 0;
    function hot(i) { return (i * 2654435761) ^ (i >>> 3); }
    const until = performance.now() + 400;
    while (performance.now() < until) { for (let i = 0; i < 1e5; i++) x ^= hot(i); await new Promise((r) => setTimeout(r, 1)); }
    await new Promise((r) => setTimeout(r, 250));
    const out = [];
    for (const tid of readdirSync("/proc/self/task")) {
      const comm = readFileSync("/proc/self/task/" + tid + "/comm", "latin1").trim();
      if (comm !== "JITWorker") continue;
      const stat = readFileSync("/proc/self/task/" + tid + "/stat", "latin1");
      out.push(Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[38]));
    }
    console.log(JSON.stringify({ policies: out, x: x & 1 }));
  `;
  const dir = mkdtempSync(join(tmpdir(), "aria-jit-"));
  dirs.push(dir);
  writeFileSync(join(dir, "child.ts"), script);
  const child = Bun.spawn([process.execPath, join(dir, "child.ts")], { stdout: "pipe", stderr: "pipe" });
  const [stdout, code] = await Promise.all([new Response(child.stdout).text(), child.exited]);
  expect(code).toBe(0);
  const { policies } = JSON.parse(stdout) as { policies: number[] };
  expect(policies.length).toBeGreaterThan(0);
  for (const policy of policies) expect(policy).toBe(5);
}, 20_000);
