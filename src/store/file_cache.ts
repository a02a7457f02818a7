/**
 * FileCache: an LRU of open files, so reading and writing 100,000 partitions never holds more
 * than `capacity` descriptors. A file is acquired for one operation and released after it;
 * only released files are closed on eviction, so the count may pass `capacity` briefly while
 * more than `capacity` operations are in flight (never in the store, which runs a few at once).
 *
 * Invariant: every handle in `entries` is open; `entries` iterates least recently used first.
 */
import { assert } from "../stdx/assert.ts";
import type { Disk, DiskFile, OpenHints } from "./disk.ts";

type Entry = { file: Promise<DiskFile>; users: number };

/** An LRU of open files over a Disk. */
export class FileCache {
  private readonly entries = new Map<string, Entry>();
  /** Old path → new path of files renamed while cached (see renamed). */
  private readonly aliases = new Map<string, string>();
  opens = 0;

  constructor(
    private readonly disk: Disk,
    readonly capacity: number,
  ) {
    assert(capacity >= 1, "file_cache: capacity must be at least 1");
  }

  /** Open files right now. */
  get size(): number {
    return this.entries.size;
  }

  /**
   * Runs `use` with `path` open for reading and writing, opening it when not cached. With
   * `random`, on a handle of its own opened with that hint (a path has at most two open).
   */
  async with<T>(
    path: string,
    use: (file: DiskFile) => Promise<T> | T,
    hints?: OpenHints,
  ): Promise<T> {
    path = this.aliases.get(path) ?? path;
    const key = hints?.random === true ? randomKey(path) : path;
    let entry = this.entries.get(key);
    if (entry === undefined) {
      this.opens++;
      entry = { file: this.disk.open(path, "write", hints), users: 1 };
      const opened = entry;
      this.entries.set(key, entry);
      entry.file.catch(() => {
        if (this.entries.get(key) === opened) this.entries.delete(key);
      });
      await this.evict();
    } else {
      this.entries.delete(key);
      this.entries.set(key, entry);
      entry.users++;
    }
    try {
      return await use(await entry.file);
    } finally {
      entry.users--;
    }
  }

  /**
   * Records that the file at `from` is now at `to` (renamed on disk by the caller): its cached
   * handles move to `to`, and an operation on `from` (a reader that took the path before the
   * rename) goes to `to` until `to` is dropped.
   */
  renamed(from: string, to: string): void {
    for (const [old, key] of [
      [from, to],
      [randomKey(from), randomKey(to)],
    ]) {
      const entry = this.entries.get(old);
      if (entry === undefined) continue;
      this.entries.delete(old);
      this.entries.set(key, entry);
    }
    this.aliases.set(from, to);
  }

  /** Closes `path` if open, both handles (before it is removed or renamed over). */
  async drop(path: string): Promise<void> {
    for (const [from, to] of this.aliases)
      if (from === path || to === path) this.aliases.delete(from);
    for (const key of [path, randomKey(path)]) {
      const entry = this.entries.get(key);
      if (entry === undefined) continue;
      this.entries.delete(key);
      await closeQuietly(entry.file);
    }
  }

  /** Closes every file. */
  async closeAll(): Promise<void> {
    const files = [...this.entries.values()].map((entry) => entry.file);
    this.entries.clear();
    await Promise.all(files.map(closeQuietly));
  }

  private async evict(): Promise<void> {
    if (this.entries.size <= this.capacity) return;
    const victims: Promise<DiskFile>[] = [];
    for (const [path, entry] of this.entries) {
      if (this.entries.size <= this.capacity) break;
      if (entry.users > 0) continue;
      this.entries.delete(path);
      victims.push(entry.file);
    }
    await Promise.all(victims.map(closeQuietly));
  }
}

/** The cache key of `path`'s handle opened with the `random` hint (no path contains a NUL). */
function randomKey(path: string): string {
  return `${path}\u0000random`;
}

async function closeQuietly(file: Promise<DiskFile>): Promise<void> {
  try {
    await (await file).close();
  } catch {
    // A handle that failed to open or close holds nothing to release.
  }
}
