/**
 * Disk: the only way the store touches files. It names just the calls the store makes, so a real
 * implementation (src/runtime/bun_disk.ts) and a deterministic simulator with crash and fault
 * injection (src/testing/sim_disk.ts) are interchangeable.
 *
 * Paths are relative to the disk's root (the data directory), `/`-separated, never absolute.
 * Contract every implementation keeps:
 * - `write` data is not durable until `sync` on that file resolves; a crash may drop or cut
 *   unsynced writes;
 * - a created, renamed or removed name is not durable until `syncDir` on its directory resolves;
 * - a failure rejects with a DiskError whose `code` says why (ENOENT, ENOSPC, EIO, EEXIST…).
 */

/** An I/O failure with a stable code (the errno name where there is one). */
export class DiskError extends Error {
  override name = "DiskError";
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Whether `error` says the file system is out of space (or quota): what the store waits out and
 * retries (docs/storage.md, a full disk). An I/O error (EIO) is not: a device that fails writes
 * is not trusted again without an operator.
 */
export function isOutOfSpace(error: unknown): boolean {
  return error instanceof DiskError && (error.code === "ENOSPC" || error.code === "EDQUOT");
}

/** How a file is opened: `read` and `write` need it to exist; `create` makes it new and empty. */
export type OpenMode = "read" | "write" | "create";

/**
 * Hints for an open; a disk may ignore either. `random`: reads of this handle will not run on
 * sequentially (a sparse reader's small regions of a pack), so the runtime may turn the kernel's
 * read-ahead off for it; without it, read-ahead past a region reads the neighbouring partitions'
 * data (8 MiB here). `direct`: writes go past the page cache (O_DIRECT) where the disk can: the
 * caller writes whole 4 KiB blocks at multiples of 4 KiB from arrays of at least that alignment,
 * and never reads the file through this handle.
 */
export type OpenHints = { random?: boolean; direct?: boolean };

/** See DiskFile.map. */
export type MapOptions = { cachedOnly?: boolean };

/** An open file. Positions are byte offsets; the store tracks its own append position. */
export interface DiskFile {
  readonly path: string;
  /** Reads up to `into.length` bytes at `position`; resolves with the count (0 at end of file). */
  read(position: number, into: Uint8Array): Promise<number>;
  /** Writes all of `bytes` at `position`, extending the file as needed. */
  write(position: number, bytes: Uint8Array): Promise<void>;
  /**
   * `write`, done before returning on the caller's thread (no thread-pool round trip): for short
   * writes on the latency path. Optional: without it callers use `write`.
   */
  writeNow?(position: number, bytes: Uint8Array): void;
  /**
   * The bytes [position, position + length) without a copy: a view of the file mapped into
   * memory, its pages in the page cache when it resolves (so reading the view waits for no
   * I/O unless memory pressure evicts them). Only for files never written again (packs,
   * subtree stores): a later write or truncate may change the view or fault on it. Null when
   * the file cannot be mapped or ends before `position + length`; optional: without it
   * callers read. `cachedOnly`: null also when any page of the region is not in the page cache
   * (nothing is read then: the caller reads the bytes itself).
   */
  map?(position: number, length: number, options?: MapOptions): Promise<Uint8Array | null>;
  /** The current size in bytes. */
  size(): Promise<number>;
  /** Makes every write so far durable (fsync). */
  sync(): Promise<void>;
  /** Cuts or extends the file to `size` bytes (not durable until `sync`). */
  truncate(size: number): Promise<void>;
  /** Releases the handle; the file stays. */
  close(): Promise<void>;
}

/** A directory tree of files, rooted at the data directory. */
export interface Disk {
  /** Opens `path` (see OpenMode); `hints` may be ignored. */
  open(path: string, mode: OpenMode, hints?: OpenHints): Promise<DiskFile>;
  /** Names (not paths) of the entries of `dir`; an empty array when it does not exist. */
  list(dir: string): Promise<string[]>;
  /** Creates `dir` and its parents when missing. */
  mkdir(dir: string): Promise<void>;
  /** Removes the file `path`; a missing file is not an error. */
  remove(path: string): Promise<void>;
  /** Atomically replaces `to` with `from`. */
  rename(from: string, to: string): Promise<void>;
  /** Makes creates, renames and removes in `dir` durable (fsync of the directory). */
  syncDir(dir: string): Promise<void>;
  /**
   * The file system's size and the bytes an unprivileged writer may still use (statfs), or null
   * when it cannot tell. Optional: without it callers take the space as unknown.
   */
  space?(): Promise<DiskSpace | null>;
}

/** See Disk.space. */
export type DiskSpace = { freeBytes: number; totalBytes: number };

/** The directory part of a relative path ("" for the root). */
export function dirOf(path: string): string {
  const slash = path.lastIndexOf("/");
  return slash < 0 ? "" : path.slice(0, slash);
}

/** Reads until `into` is full or the file ends; the count read. */
export async function readFully(
  file: DiskFile,
  position: number,
  into: Uint8Array,
): Promise<number> {
  let filled = 0;
  while (filled < into.length) {
    const read = await file.read(position + filled, into.subarray(filled));
    if (read === 0) break;
    filled += read;
  }
  return filled;
}
