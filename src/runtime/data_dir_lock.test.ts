import { afterAll, expect, test } from "bun:test";
import { chmodSync, existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { acquireLock, readLock, startTimeOf } from "./data_dir_lock.ts";

const root = mkdtempSync(join(tmpdir(), "aria-lock-"));
afterAll(() => rmSync(root, { recursive: true, force: true }));
let n = 0;
const fresh = () => mkdtempSync(join(root, `d${n++}-`));
const serve = { command: "serve", adminUrl: null };

test("one taker of many at once gets a fresh directory's lock; the others see it held", async () => {
  for (let round = 0; round < 20; round++) {
    const dir = fresh();
    const results = await Promise.all(Array.from({ length: 4 }, () => acquireLock(dir, serve)));
    expect(results.filter((r) => r.ok).length).toBe(1);
    for (const r of results) if (!r.ok) expect(r.holder.pid).toBe(process.pid);
    for (const r of results) if (r.ok) await r.lock.release();
    expect(existsSync(join(dir, "LOCK"))).toBe(false);
  }
});

test("a dead owner's lock is taken over by one of two takers at once; a LOCK naming this process's pid that it does not hold is stale (a restarted pid 1)", async () => {
  for (const pid of [2 ** 22 + 12345, process.pid]) {
    for (let round = 0; round < 25; round++) {
      const dir = fresh();
      writeFileSync(join(dir, "LOCK"), JSON.stringify({ pid, command: "serve", adminUrl: null }), {
        mode: 0o600,
      });
      expect(await readLock(dir)).toBeNull();
      const results = await Promise.all(Array.from({ length: 2 }, () => acquireLock(dir, serve)));
      expect(results.filter((r) => r.ok).length).toBe(1);
      expect(JSON.parse(readFileSync(join(dir, "LOCK"), "utf8")).pid).toBe(process.pid);
      for (const r of results) if (r.ok) await r.lock.release();
    }
  }
});

test("an empty or damaged LOCK (a crash while an older build wrote it) is stale; a held lock is reported with its admin URL after an update", async () => {
  const dir = fresh();
  writeFileSync(join(dir, "LOCK"), "");
  const taken = await acquireLock(dir, serve);
  expect(taken.ok).toBe(true);
  if (!taken.ok) return;
  await taken.lock.update({ adminUrl: "http://127.0.0.1:1234" });
  expect((await readLock(dir))?.adminUrl).toBe("http://127.0.0.1:1234");
  const second = await acquireLock(dir, { command: "split", adminUrl: null });
  expect(second.ok).toBe(false);
  await taken.lock.release();
  expect(await readLock(dir)).toBeNull();
});

test("a release leaves a LOCK that is no longer this process's in place", async () => {
  const dir = fresh();
  const taken = await acquireLock(dir, serve);
  expect(taken.ok).toBe(true);
  if (!taken.ok) return;
  // Someone else's lock now (taken over by hand, say).
  writeFileSync(join(dir, "LOCK"), JSON.stringify({ pid: 1, command: "serve", adminUrl: null }));
  await taken.lock.release();
  expect(existsSync(join(dir, "LOCK"))).toBe(true);
});

test("a LOCK this process cannot read counts as held, not as missing", async () => {
  if (process.getuid?.() === 0) {
    // root reads any file: make LOCK a directory instead (reading it fails with EISDIR).
    const dir = fresh();
    const lock = join(dir, "LOCK");
    require("node:fs").mkdirSync(lock);
    expect((await readLock(dir))?.command).toContain("cannot be read");
    const taken = await acquireLock(dir, serve);
    expect(taken.ok).toBe(false);
    expect(existsSync(lock)).toBe(true);
    return;
  }
  const dir = fresh();
  writeFileSync(join(dir, "LOCK"), JSON.stringify({ pid: 1, command: "serve", adminUrl: null }));
  chmodSync(join(dir, "LOCK"), 0);
  expect((await readLock(dir))?.command).toContain("cannot be read");
  expect((await acquireLock(dir, serve)).ok).toBe(false);
});

test("a LOCK naming a live process that is not its owner is stale (pid reuse): taken over with a message; a live owner's is refused", async () => {
  // A live process that is no Aria server: a `sleep` this test starts (ended below).
  const sleeper = Bun.spawn(["sleep", "30"]);
  // A live process that could be one (bun), for the older LOCKs that name only a pid.
  const bun = Bun.spawn([process.execPath, "-e", "setTimeout(() => {}, 30000)"]);
  try {
    const started = startTimeOf(sleeper.pid);
    if (started === null) {
      console.log("skipped: /proc/PID/stat cannot be read here (not Linux)");
      return;
    }
    const write = (dir: string, lock: object) =>
      writeFileSync(
        join(dir, "LOCK"),
        JSON.stringify({ command: "serve", adminUrl: null, ...lock }),
      );
    // Its start time is not the owner's (the pid was reused), or an older LOCK (pid only) names
    // a program that is neither aria nor bun: stale, taken over, and the taker is told why.
    for (const lock of [
      { pid: sleeper.pid, startTime: `${Number(started) + 1}` },
      { pid: sleeper.pid },
    ]) {
      const dir = fresh();
      write(dir, lock);
      expect(await readLock(dir)).toBeNull();
      const taken = await acquireLock(dir, serve);
      expect(taken.ok).toBe(true);
      if (!taken.ok) return;
      expect(taken.replaced).toContain(`pid ${sleeper.pid}`);
      expect(taken.replaced).toContain(
        lock.startTime === undefined ? "another program" : "another process",
      );
      const written = JSON.parse(readFileSync(join(dir, "LOCK"), "utf8"));
      expect(written.pid).toBe(process.pid);
      expect(written.startTime).toBe(startTimeOf(process.pid));
      await taken.lock.release();
    }
    // The owner's own start time, or an older LOCK naming a live bun: held.
    for (const lock of [{ pid: sleeper.pid, startTime: started }, { pid: bun.pid }]) {
      const dir = fresh();
      write(dir, lock);
      expect((await readLock(dir))?.pid).toBe(lock.pid);
      const refused = await acquireLock(dir, serve);
      expect(refused.ok).toBe(false);
    }
  } finally {
    sleeper.kill();
    bun.kill();
  }
});
