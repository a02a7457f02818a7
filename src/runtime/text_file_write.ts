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
 * once lost one's change): the file `PATH.lock`, taken exactly as a data directory's LOCK is
 * (data_dir_lock.ts: linked, stale when its process is gone or another one); a live holder is
 * waited for, up to `waitMs`.
 */
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";
import { acquireLockAt } from "./data_dir_lock.ts";

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

/**
 * Takes the lock `PATH.lock` beside `path` (data_dir_lock's protocol, `command` "users"), waiting
 * up to `waitMs` for a live holder; the reason (naming the holder) when it cannot.
 */
export async function lockBeside(
  path: string,
  options: { waitMs?: number } = {},
): Promise<{ ok: true; lock: FileLock } | { ok: false; reason: string }> {
  const lockPath = `${path}.lock`;
  const deadline = Date.now() + (options.waitMs ?? 10_000);
  for (let wait = 5; ; wait = Math.min(wait * 2, 50)) {
    let taken: Awaited<ReturnType<typeof acquireLockAt>>;
    try {
      taken = await acquireLockAt(lockPath, { command: "users", adminUrl: null });
    } catch (error) {
      return { ok: false, reason: `Cannot lock ${lockPath}: ${(error as Error).message}` };
    }
    if (taken.ok) return { ok: true, lock: { release: taken.lock.release } };
    if (Date.now() >= deadline)
      return {
        ok: false,
        reason: `${lockPath} is held by pid ${taken.holder.pid} (another aria users?)`,
      };
    await new Promise((resolve) => setTimeout(resolve, wait));
  }
}
