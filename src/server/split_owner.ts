/**
 * split_owner: who performs `aria split` on a data directory. When `aria serve` holds the
 * directory's LOCK (with its admin URL), the split talks to it (split_host.ts) and the server
 * switches while it serves. Otherwise this process takes the lock itself, opens the store (the
 * only process using it) and switches locally. Also the source of the default worker count.
 */
import type { SplitHost } from "../split/executor.ts";
import { storeHost } from "../split/in_process.ts";
import { Store } from "../store/mod.ts";
import type { Disk } from "../store/disk.ts";
import { acquireLock, readLock, runtime } from "../runtime/mod.ts";
import { remoteHost } from "./split_host.ts";

/** The host of a split, how it was reached, and how to let go of it. */
export type SplitOwner = {
  host: SplitHost;
  via: "server" | "local";
  adminUrl: string | null;
  disk: Disk;
  close(): Promise<void>;
};

/**
 * Finds or becomes the owner of `dataDir`; a reason string when neither is possible. `ca`: PEM
 * text trusted for a serving owner's HTTPS admin app (absent: the system's CAs).
 */
export async function openSplitOwner(
  dataDir: string,
  options: { ca?: string } = {},
): Promise<SplitOwner | string> {
  const disk = runtime.openDisk(dataDir);
  const names = await disk.list("").catch((): string[] => []);
  if (!names.includes("MANIFEST") && !names.includes("segments"))
    return `"${dataDir}" is not an Aria data directory (no MANIFEST)`;
  for (let attempt = 0; attempt < 2; attempt++) {
    const holder = await readLock(dataDir);
    if (holder !== null) {
      if (holder.adminUrl === null)
        return `"${dataDir}" is in use by pid ${holder.pid} (aria ${holder.command}); try again when it is done`;
      return {
        host: remoteHost(holder.adminUrl, holder.adminToken, options.ca),
        via: "server",
        adminUrl: holder.adminUrl,
        disk,
        close: async () => {},
      };
    }
    const locked = await acquireLock(dataDir, { command: "split", adminUrl: null }).catch(
      (error: Error) => `cannot lock "${dataDir}": ${error.message}`,
    );
    if (typeof locked === "string") return locked;
    if (!locked.ok) continue; // someone took it meanwhile: look again
    try {
      const { store } = await Store.open(disk, {
        yieldToEvents: runtime.yieldToEvents,
        crc32: runtime.crc32,
      });
      return {
        host: storeHost(store),
        via: "local",
        adminUrl: null,
        disk,
        close: async () => {
          await store.close({ sort: false });
          await locked.lock.release();
        },
      };
    } catch (error) {
      await locked.lock.release();
      return `cannot open "${dataDir}": ${(error as Error).message}`;
    }
  }
  return `"${dataDir}" is busy`;
}

/** Worker threads by default: the machine's cores. */
export function defaultWorkers(): number {
  return Math.max(1, navigator.hardwareConcurrency);
}

/** True when standard error is a terminal (progress is drawn there only then). */
export function stderrIsTerminal(): boolean {
  return runtime.stderrIsTerminal();
}

/** Monotonic milliseconds, for the split's own timing. */
export function nowMs(): number {
  return performance.now();
}
