/**
 * data_dir_lock: the LOCK file of a data directory — one process at a time owns it (`aria serve`,
 * or `aria split` / `aria split stats` when no server runs). It holds JSON
 * `{"pid", "command", "adminUrl", "adminToken"}`: a split finds the running server there and asks
 * it to switch. Mode 0600 (it may hold the admin token).
 *
 * Taking it: the JSON is written to a file of this process's own and hard-linked to LOCK, which
 * fails if LOCK exists: LOCK is never seen empty or half written (an O_EXCL create followed by a
 * write let a second taker read an empty LOCK as a crash's and take it too). A lock whose pid is
 * not alive (a SIGKILLed owner) is stale: removed, if it is still the file judged stale (same
 * inode), and taken. A LOCK naming this process's pid is stale unless this process holds it: a
 * server restarted in a container is pid 1 again, and had refused its own dead predecessor's
 * lock for ever. A LOCK that cannot be read (other than missing) counts as held. A release
 * removes LOCK only while it is still this process's. Left: two takers of one stale lock at the
 * same instant can both win if one replaces it between the other's inode check and its removal
 * (microseconds); a kernel lock (flock) would close that, and the runtime layer has none yet
 * under both runtimes.
 */
import { constants, promises as fs } from "node:fs";
import { join } from "node:path";

/** Who holds a data directory. */
export type LockInfo = { pid: number; command: string; adminUrl: string | null; adminToken?: string };

const LOCK_NAME = "LOCK";

/** LOCK paths this process holds. */
const held = new Set<string>();
let takers = 0;

/** What LOCK says: its holder (alive or not), "missing", or "unreadable" (an error other than ENOENT). */
async function lockFile(path: string): Promise<{ info: LockInfo | null; ino: number } | "missing" | "unreadable"> {
  let text: string;
  let ino: number;
  try {
    const handle = await fs.open(path, constants.O_RDONLY);
    try {
      ino = (await handle.stat()).ino;
      text = await handle.readFile("utf8");
    } finally {
      await handle.close();
    }
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "ENOENT" ? "missing" : "unreadable";
  }
  try {
    return { info: JSON.parse(text) as LockInfo, ino };
  } catch {
    return { info: null, ino }; // written by an older build, or damaged: no live owner is named
  }
}

/** The live holder of `dataDir`'s lock, or null (none, or a dead owner's). */
export async function readLock(dataDir: string): Promise<LockInfo | null> {
  const path = join(dataDir, LOCK_NAME);
  const found = await lockFile(path);
  if (found === "missing") return null;
  if (found === "unreadable") return { pid: 0, command: "unknown (its LOCK cannot be read)", adminUrl: null };
  return found.info !== null && alive(found.info.pid, path) ? found.info : null;
}

function alive(pid: number, path: string): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return held.has(path);
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A held lock. */
export type HeldLock = { update(info: Partial<LockInfo>): Promise<void>; release(): Promise<void> };

/** Takes `dataDir`'s lock, or returns its live holder. Rejects only when the directory cannot be written. */
export async function acquireLock(dataDir: string, info: Omit<LockInfo, "pid">): Promise<{ ok: true; lock: HeldLock } | { ok: false; holder: LockInfo }> {
  const path = join(dataDir, LOCK_NAME);
  // This taker's own file (a process may try more than once at a time: tests, a split beside a server's start).
  const mine = `${path}.${process.pid}.${++takers}`;
  let current: LockInfo = { pid: process.pid, ...info };
  const write = async (target: string) => {
    await fs.writeFile(target, JSON.stringify(current), { mode: 0o600 });
  };
  for (let attempt = 0; attempt < 3; attempt++) {
    await write(mine);
    let linked = false;
    try {
      await fs.link(mine, path);
      linked = true;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    } finally {
      await fs.unlink(mine).catch(() => {});
    }
    if (linked) {
      held.add(path);
      const lock: HeldLock = {
        update: async (change) => {
          current = { ...current, ...change };
          await write(mine);
          await fs.rename(mine, path);
        },
        release: async () => {
          held.delete(path);
          const found = await lockFile(path);
          if (typeof found === "object" && found.info?.pid === process.pid) await fs.unlink(path).catch(() => {});
        },
      };
      return { ok: true, lock };
    }
    const found = await lockFile(path);
    if (found === "missing") continue;
    if (found === "unreadable") return { ok: false, holder: { pid: 0, command: "unknown (its LOCK cannot be read)", adminUrl: null } };
    if (found.info !== null && alive(found.info.pid, path)) return { ok: false, holder: found.info };
    // Stale: its owner died. Removed only if LOCK is still that file (another taker may have
    // replaced it meanwhile).
    const now = await fs.stat(path).catch(() => null);
    if (now !== null && now.ino === found.ino) await fs.unlink(path).catch(() => {});
  }
  const holder = await readLock(dataDir);
  return { ok: false, holder: holder ?? { pid: 0, command: "unknown", adminUrl: null } };
}
