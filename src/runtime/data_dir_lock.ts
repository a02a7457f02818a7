/**
 * data_dir_lock: the LOCK file of a data directory — one process at a time owns it (`aria serve`,
 * or `aria split` / `aria split stats` when no server runs). It holds JSON
 * `{"pid", "command", "adminUrl", "adminToken"}`: a split finds the running server there and asks
 * it to switch. Created with O_EXCL (mode 0600: it may hold the admin token); a lock whose pid is
 * no longer alive (a SIGKILLed owner) is stale and taken over.
 */
import { constants, promises as fs } from "node:fs";
import { join } from "node:path";

/** Who holds a data directory. */
export type LockInfo = { pid: number; command: string; adminUrl: string | null; adminToken?: string };

const LOCK_NAME = "LOCK";

/** The live holder of `dataDir`'s lock, or null (none, or a dead owner's). */
export async function readLock(dataDir: string): Promise<LockInfo | null> {
  let text: string;
  try {
    text = await fs.readFile(join(dataDir, LOCK_NAME), "utf8");
  } catch {
    return null;
  }
  let info: LockInfo;
  try {
    info = JSON.parse(text) as LockInfo;
  } catch {
    return null; // a lock cut short by a crash while it was written: its owner is gone
  }
  return alive(info.pid) ? info : null;
}

function alive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  if (pid === process.pid) return true;
  try {
    process.kill(pid, 0);
    return true;
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
}

/** A held lock. */
export type HeldLock = { update(info: Partial<LockInfo>): Promise<void>; release(): Promise<void> };

/** Takes `dataDir`'s lock, or returns its live holder. */
export async function acquireLock(dataDir: string, info: Omit<LockInfo, "pid">): Promise<{ ok: true; lock: HeldLock } | { ok: false; holder: LockInfo }> {
  const path = join(dataDir, LOCK_NAME);
  let current: LockInfo = { pid: process.pid, ...info };
  for (let attempt = 0; attempt < 3; attempt++) {
    try {
      const handle = await fs.open(path, constants.O_WRONLY | constants.O_CREAT | constants.O_EXCL, 0o600);
      await handle.writeFile(JSON.stringify(current));
      await handle.close();
      const lock: HeldLock = {
        update: async (change) => {
          current = { ...current, ...change };
          await fs.writeFile(`${path}.tmp`, JSON.stringify(current), { mode: 0o600 });
          await fs.rename(`${path}.tmp`, path);
        },
        release: async () => {
          await fs.unlink(path).catch(() => {});
        },
      };
      return { ok: true, lock };
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== "EEXIST") throw error;
    }
    const holder = await readLock(dataDir);
    if (holder !== null) return { ok: false, holder };
    await fs.unlink(path).catch(() => {}); // stale: its owner died
  }
  const holder = await readLock(dataDir);
  return { ok: false, holder: holder ?? { pid: 0, command: "unknown", adminUrl: null } };
}
