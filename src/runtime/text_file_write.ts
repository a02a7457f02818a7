/**
 * writeTextFileAtomic: replaces a small text file whole — written beside it, synced, renamed over
 * it — so a reader (a server reloading on SIGHUP) sees the old file or the new one, never half.
 * Used by `aria users` for the users file (mode 0600 by default: it holds token hashes).
 */
import { open, rename, rm } from "node:fs/promises";

/** Writes `text` to `path` through a temporary file and a rename; the reason when it cannot. */
export async function writeTextFileAtomic(
  path: string,
  text: string,
  options: { mode?: number } = {},
): Promise<{ ok: true } | { ok: false; reason: string }> {
  const temporary = `${path}.${process.pid}.tmp`;
  try {
    const file = await open(temporary, "w", options.mode ?? 0o600);
    try {
      await file.writeFile(text);
      await file.sync();
    } finally {
      await file.close();
    }
    await rename(temporary, path);
    return { ok: true };
  } catch (error) {
    await rm(temporary, { force: true }).catch(() => {});
    return { ok: false, reason: (error as Error).message };
  }
}
