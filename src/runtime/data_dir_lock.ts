/**
 * data_dir_lock: the LOCK file of a data directory — one process at a time owns it (`aria serve`,
 * or `aria split` / `aria split stats` when no server runs). It holds JSON
 * `{"pid", "command", "adminUrl", "adminToken", "startTime"}`: a split finds the running server there and asks
 * it to switch. Mode 0600 (it may hold the admin token).
 *
 * Taking it: the JSON is written to a file of this process's own and hard-linked to LOCK, which
 * fails if LOCK exists: LOCK is never seen empty or half written (an O_EXCL create followed by a
 * write let a second taker read an empty LOCK as a crash's and take it too). A lock whose pid is
 * not alive (a SIGKILLed owner) is stale: renamed aside (of two takers, one gets it), removed if
 * it is the file judged stale (the same bytes; a fresh lock grabbed by mistake is linked back),
 * and taken. A LOCK naming this process's pid is stale unless one of this process's
 * takers wrote it (each names itself in `taker`): a server restarted in a container is pid 1
 * again, and had refused its own dead predecessor's lock for ever. A LOCK that cannot be read (other than missing) counts as held. A release
 * removes LOCK only while it is still this taker's. Left: with three or more takers of one
 * stale lock at once, one may link its fresh lock in the moment another has a grabbed fresh lock
 * aside, which then cannot go back (two would hold it); a kernel lock (flock) would close that,
 * and the runtime layer has none yet under both runtimes.
 *
 * A live pid is not proof of a live owner: after a container restart or pid reuse it may be
 * another program (pid 1, say). The LOCK names its process's start time (`/proc/PID/stat` field
 * 22, in clock ticks since boot): a live pid whose start time differs is stale. A LOCK of an older
 * build names only the pid: then a live pid whose command line (`/proc/PID/cmdline`) names
 * neither aria nor bun is stale. Where /proc cannot be read (not Linux), a live pid counts as
 * the owner, as before.
 */
import { promises as fs, readFileSync } from "node:fs";
import { join } from "node:path";

/** Who holds a data directory. */
export type LockInfo = {
  pid: number;
  command: string;
  adminUrl: string | null;
  adminToken?: string;
  taker?: string;
  /** The holder's start time (/proc/PID/stat field 22); absent in LOCKs of older builds. */
  startTime?: string;
};

const LOCK_NAME = "LOCK";
/** The holder reported for a LOCK that exists but cannot be read. */
const UNREADABLE: LockInfo = {
  pid: 0,
  command: "unknown (its LOCK cannot be read)",
  adminUrl: null,
};

/** Takers (`pid.n`) of this process that hold a lock or are taking one. */
const liveTakers = new Set<string>();
let takers = 0;

/** What LOCK says: its holder (alive or not), "missing", or "unreadable" (an error other than ENOENT). */
async function lockFile(
  path: string,
): Promise<{ info: LockInfo | null; text: string } | "missing" | "unreadable"> {
  let text: string;
  try {
    text = await fs.readFile(path, "utf8");
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : "unreadable";
  }
  try {
    return { info: JSON.parse(text) as LockInfo, text };
  } catch {
    return { info: null, text }; // written by an older build, or damaged: no live owner is named
  }
}

/** The live holder of `dataDir`'s lock, or null (none, or a dead owner's). */
export async function readLock(dataDir: string): Promise<LockInfo | null> {
  return await readLockAt(join(dataDir, LOCK_NAME));
}

/** The live holder of the lock file `path`, or null (none, or a dead owner's). */
async function readLockAt(path: string): Promise<LockInfo | null> {
  const found = await lockFile(path);
  if (found === "missing") return null;
  if (found === "unreadable") return UNREADABLE;
  return found.info !== null && alive(found.info) ? found.info : null;
}

function alive(info: LockInfo): boolean {
  return staleReason(info) === null;
}

/** Why the holder `info` names is not a live owner of the lock, or null when it is. */
function staleReason(info: LockInfo): string | null {
  const pid = info.pid;
  if (!Number.isSafeInteger(pid) || pid <= 0) return "it names no process";
  if (pid === process.pid)
    return info.taker !== undefined && liveTakers.has(info.taker)
      ? null
      : `pid ${pid} is this process, which did not take it`;
  try {
    process.kill(pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return `pid ${pid} is not running`;
  }
  if (info.startTime !== undefined) {
    const started = startTimeOf(pid);
    if (started !== null && started !== info.startTime)
      return `pid ${pid} is another process (started at ${started}, the owner at ${info.startTime})`;
    return null;
  }
  const command = commandLineOf(pid);
  if (command !== null && !/aria|bun/i.test(command))
    return `pid ${pid} is another program (${JSON.stringify(command.slice(0, 80))})`;
  return null;
}

/** Process `pid`'s start time, field 22 of /proc/PID/stat (clock ticks since boot), or null. */
export function startTimeOf(pid: number): string | null {
  let stat: string;
  try {
    stat = readFileSync(`/proc/${pid}/stat`, "utf8");
  } catch {
    return null;
  }
  // Field 2 is the command in parentheses and may hold spaces or parentheses: count after it.
  const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  return fields[22 - 3] ?? null;
}

/** Process `pid`'s command line, its arguments joined by spaces, or null. */
function commandLineOf(pid: number): string | null {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, "utf8").split("\0").join(" ").trim();
  } catch {
    return null;
  }
}

/** A held lock. */
export type HeldLock = { update(info: Partial<LockInfo>): Promise<void>; release(): Promise<void> };

/**
 * Takes `dataDir`'s lock, or returns its live holder; `replaced` says which stale lock it took
 * over and why it was stale. Rejects only when the directory cannot be written.
 */
export async function acquireLock(
  dataDir: string,
  info: Omit<LockInfo, "pid" | "startTime">,
): Promise<{ ok: true; lock: HeldLock; replaced?: string } | { ok: false; holder: LockInfo }> {
  return await acquireLockAt(join(dataDir, LOCK_NAME), info);
}

/** acquireLock for the lock file `path` (a data directory's LOCK, or a lock beside a file). */
export async function acquireLockAt(
  path: string,
  info: Omit<LockInfo, "pid" | "startTime">,
): Promise<{ ok: true; lock: HeldLock; replaced?: string } | { ok: false; holder: LockInfo }> {
  // This taker's name and own file (a process may try more than once at a time: tests, a split
  // beside a server's start). It counts as live from before its link until its release.
  // (Random too: a restarted pid 1's first taker must not write the bytes its dead predecessor's did.)
  const taker = `${process.pid}.${++takers}.${Math.random().toString(36).slice(2, 10)}`;
  const mine = `${path}.${taker}`;
  const startTime = startTimeOf(process.pid) ?? undefined;
  let current: LockInfo = { pid: process.pid, ...info, taker, startTime };
  let replaced: string | undefined;
  const write = async (target: string) => {
    await fs.writeFile(target, JSON.stringify(current), { mode: 0o600 });
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    await write(mine);
    let linked = false;
    liveTakers.add(taker);
    try {
      await fs.link(mine, path);
      linked = true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    } finally {
      if (!linked) liveTakers.delete(taker);
      await fs.unlink(mine).catch(() => {});
    }
    if (linked) {
      const lock: HeldLock = {
        update: async (change) => {
          current = { ...current, ...change };
          await write(mine);
          await fs.rename(mine, path);
        },
        release: async () => {
          const found = await lockFile(path);
          if (typeof found === "object" && found.info?.taker === taker)
            await fs.unlink(path).catch(() => {});
          liveTakers.delete(taker);
        },
      };
      return replaced === undefined ? { ok: true, lock } : { ok: true, lock, replaced };
    }
    const found = await lockFile(path);
    if (found === "missing") continue;
    if (found === "unreadable") return { ok: false, holder: UNREADABLE };
    const stale = found.info === null ? "it names no owner" : staleReason(found.info);
    if (stale === null && found.info !== null) return { ok: false, holder: found.info };
    // Not its text: it may hold the old owner's admin token.
    replaced = `a stale LOCK of pid ${found.info?.pid ?? "?"} (aria ${found.info?.command ?? "?"}): ${stale}`;
    // Stale: its owner died. Moved aside (atomic: of two takers one gets it), then removed if it
    // is the file judged stale (the same bytes: every fresh lock names its own taker; an inode
    // number is no proof, a removed file's is soon reused); a fresh lock another taker linked
    // meanwhile is put back.
    const aside = `${path}.stale.${taker}`;
    const moved = await fs.rename(path, aside).then(
      () => true,
      () => false,
    );
    if (!moved) continue;
    const grabbed = await fs.readFile(aside, "utf8").catch(() => null);
    if (grabbed !== found.text) await fs.link(aside, path).catch(() => {});
    await fs.unlink(aside).catch(() => {});
  }
  const holder = await readLockAt(path);
  return { ok: false, holder: holder ?? { pid: 0, command: "unknown", adminUrl: null } };
}
