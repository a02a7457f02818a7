/**
 * FileCache: an LRU of open files, so reading and writing 100,000 partitions never holds more
 * than `capacity` descriptors. A file is acquired for one operation and released after it;
 * only released files are closed on eviction, so the count may pass `capacity` briefly while
 * more than `capacity` operations are in flight (never in the store, which runs a few at once).
 *
 * Invariant: every handle in `entries` is open; `entries` iterates least recently used first.
 */
import { assert } from "../stdx/assert.ts";
import type { Disk, DiskFile } from "./disk.ts";

type Entry = { file: Promise<DiskFile>; users: number };

/** An LRU of open files over a Disk. */
export class FileCache {
  private readonly entries = new Map<string, Entry>();
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

  /** Runs `use` with `path` open for reading and writing, opening it when not cached. */
  async with<T>(path: string, use: (file: DiskFile) => Promise<T> | T): Promise<T> {
    let entry = this.entries.get(path);
    if (entry === undefined) {
      this.opens++;
      entry = { file: this.disk.open(path, "write"), users: 1 };
      const opened = entry;
      this.entries.set(path, entry);
      entry.file.catch(() => {
        if (this.entries.get(path) === opened) this.entries.delete(path);
      });
      await this.evict();
    } else {
      this.entries.delete(path);
      this.entries.set(path, entry);
      entry.users++;
    }
    try {
      return await use(await entry.file);
    } finally {
      entry.users--;
    }
  }

  /** Closes `path` if open (before it is removed or renamed over). */
  async drop(path: string): Promise<void> {
    const entry = this.entries.get(path);
    if (entry === undefined) return;
    this.entries.delete(path);
    await closeQuietly(entry.file);
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

async function closeQuietly(file: Promise<DiskFile>): Promise<void> {
  try {
    await (await file).close();
  } catch {
    // A handle that failed to open or close holds nothing to release.
  }
}
