/**
 * writeTextFileAtomic: replaces a small text file whole — written beside it, synced, renamed over
 * it — so a reader (a server reloading on SIGHUP) sees the old file or the new one, never half.
 * Used by `aria users` for the users file (mode 0600 by default: it holds token hashes).
 *
 * The temporary file beside it has an unpredictable name (16 random bytes) and is created
 * exclusively (O_CREAT|O_EXCL: it fails on any existing name, a symlink included, and never
 * follows one), so a symlink planted in the directory cannot redirect the write. Its mode is set
 * on the open file (whatever the umask), and the rename puts a regular file in place of whatever
 * was at `path`, a symlink included (the link is replaced, not its target).
 *
 * lockBeside: an exclusive lock around a read-modify-write of such a file (two `aria users` at
 * once lost one's change), the file `PATH.lock` holding `{"pid", "startTime", "taker"}`. Taken as
 * data_dir_lock takes a data directory's LOCK: written to a file of its own and hard-linked to
 * `PATH.lock` (fails if it exists; never seen empty); a lock whose pid is not running, or is
 * another process (its start time, /proc/PID/stat field 22, differs), is stale: moved aside and
 * removed (put back if it was not the stale one). A live holder is waited for, up to `waitMs`.
 */
import { randomBytes } from "node:crypto";
import { link, open, readFile, rename, rm, unlink, writeFile } from "node:fs/promises";
import { startTimeOf } from "./data_dir_lock.ts";

/** Writes `text` to `path` through a temporary file and a rename; the reason when it cannot. */
export async function writeTextFileAtomic(
  path: string,
  text: string,
  options: { mode?: number } = {},
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const temporary = `${path}.${randomBytes(16).toString("hex")}.tmp`;
  const mode = options.mode ?? 0o600;
  let created = false;
  try {
    const file = await open(temporary, "wx", mode);
    created = true;
    try {
      await file.chmod(mode);
      await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, path);
    return { ok: true };
  } catch (error) {
    if (created) await rm(temporary, { force: true }).catch(() => {});
    return { ok: false, reason: (error as Error).message };
  }
}

/** A held lock beside a file: `release` removes it while it is still this taker's. */
export type FileLock = { release(): Promise<void> };

type LockHolder = { pid: number; startTime?: string | null; taker?: string };

/**
 * Takes the lock `PATH.lock` beside `path`, waiting up to `waitMs` for a live holder; the reason
 * (naming the holder) when it cannot.
 */
export async function lockBeside(
  path: string,
  options: { waitMs?: number } = {},
): Promise<{ ok: true; lock: FileLock } | { ok: false; reason: string }> {
  const lockPath = `${path}.lock`;
  const taker = randomBytes(8).toString("hex");
  const mine = `${lockPath}.${taker}`;
  const text = JSON.stringify({ pid: process.pid, startTime: startTimeOf(process.pid), taker });
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  let holder = "";
  try {
    await writeFile(mine, text, { mode: 0o600, flag: "wx" });
  } catch (error) {
    return { ok: false, reason: `Cannot create ${mine}: ${(error as Error).message}` };
  }
  try {
    for (let wait = 5; ; wait = Math.min(wait * 2, 50)) {
      try {
        await link(mine, lockPath);
        const release = async () => {
          const now = await readFile(lockPath, "utf8").catch(() => null);
          if (now === text) await unlink(lockPath).catch(() => {});
        };
        return { ok: true, lock: { release } };
      } catch (error) {
        if ((error as NodeJS.ErrnoException).code !== "EEXIST")
          return { ok: false, reason: `Cannot lock ${lockPath}: ${(error as Error).message}` };
      }
      const found = await readFile(lockPath, "utf8").catch(() => null);
      if (found === null) continue; // released meanwhile
      let info: LockHolder | null = null;
      try {
        info = JSON.parse(found) as LockHolder;
      } catch {}
      if (info === null || !holderAlive(info)) {
        // Stale: moved aside (of two takers one gets it); put back if it is not the file judged
        // stale (a fresh lock another taker linked meanwhile).
        const aside = `${lockPath}.stale.${taker}`;
        if (
          await rename(lockPath, aside).then(
            () => true,
            () => false,
          )
        ) {
          const grabbed = await readFile(aside, "utf8").catch(() => null);
          if (grabbed !== found) await link(aside, lockPath).catch(() => {});
          await unlink(aside).catch(() => {});
        }
        continue;
      }
      holder = `pid ${info.pid}`;
      if (Date.now() >= deadline)
        return { ok: false, reason: `${lockPath} is held by ${holder} (another aria users?)` };
      await new Promise((resolve) => setTimeout(resolve, wait));
    }
  } finally {
    await unlink(mine).catch(() => {});
  }
}

/** Whether the process a lock names still runs (the same process: its start time matches). */
function holderAlive(info: LockHolder): boolean {
  if (!Number.isSafeInteger(info.pid) || info.pid <= 0) return false;
  try {
    process.kill(info.pid, 0);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== "EPERM") return false;
  }
  if (typeof info.startTime !== "string") return true;
  const started = startTimeOf(info.pid);
  return started === null || started === info.startTime;
}
