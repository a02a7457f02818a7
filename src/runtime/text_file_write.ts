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
 * Not here: serializing writers (the caller holds a lock: src/cli/users.ts).
 */
import { randomBytes } from "node:crypto";
import { open, rename, rm } from "node:fs/promises";

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
