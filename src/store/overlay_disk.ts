/**
 * overlay_disk: a copy-on-write view of a Disk for `aria repair --dry-run` — recovery runs on it
 * exactly as on the real directory, and nothing reaches the real one. Reads go to the base disk
 * until a file is written; then the file's bytes are copied into memory and changed there.
 * Removes, renames and creates change only the view's names; syncs do nothing.
 *
 * Not here: deciding anything about the files (recovery.ts, repair.ts). Invariant: no method
 * calls a base method that changes the base (only open "read", list, and reads).
 */
import { type Disk, DiskError, type DiskFile, type OpenMode, dirOf } from "./disk.ts";

/** What the view holds at a path: the base file of that name (possibly cut), or bytes of its own. */
type Entry = { base: string | null; limit: number; data: Uint8Array | null };

/** A Disk that changes nothing on `base`: every change lives in memory. */
export class OverlayDisk implements Disk {
  /** Paths the view changed: their entry, or null when removed. */
  private readonly entries = new Map<string, Entry | null>();

  constructor(private readonly base: Disk) {}

  async open(path: string, mode: OpenMode): Promise<DiskFile> {
    let entry = this.entries.get(path);
    if (mode === "create" || (entry === null && mode !== "read")) {
      entry = { base: null, limit: 0, data: new Uint8Array(0) };
      this.entries.set(path, entry);
    }
    if (entry === null) throw new DiskError("ENOENT", `no such file: ${path}`);
    if (entry === undefined) {
      // Fails as the base does for a missing file.
      await (await this.base.open(path, "read")).close();
      entry = { base: path, limit: Number.POSITIVE_INFINITY, data: null };
      this.entries.set(path, entry);
    }
    return new OverlayFile(path, entry, this.base);
  }

  async list(dir: string): Promise<string[]> {
    const names = new Set(await this.base.list(dir));
    for (const [path, entry] of this.entries) {
      if (dirOf(path) !== dir) continue;
      const name = path.slice(dir === "" ? 0 : dir.length + 1);
      if (entry === null) names.delete(name);
      else names.add(name);
    }
    return [...names];
  }

  async mkdir(_dir: string): Promise<void> {}

  async remove(path: string): Promise<void> {
    this.entries.set(path, null);
  }

  async rename(from: string, to: string): Promise<void> {
    const entry = this.entries.get(from);
    if (entry === null) throw new DiskError("ENOENT", `no such file: ${from}`);
    this.entries.set(to, entry ?? { base: from, limit: Number.POSITIVE_INFINITY, data: null });
    this.entries.set(from, null);
  }

  async syncDir(_dir: string): Promise<void> {}
}

class OverlayFile implements DiskFile {
  private baseFile: DiskFile | null = null;

  constructor(
    readonly path: string,
    private readonly entry: Entry,
    private readonly base: Disk,
  ) {}

  async read(position: number, into: Uint8Array): Promise<number> {
    const entry = this.entry;
    if (entry.data !== null) {
      const end = Math.min(entry.limit, position + into.length);
      if (end <= position) return 0;
      into.set(entry.data.subarray(position, end));
      return end - position;
    }
    const room = Math.max(0, Math.min(into.length, entry.limit - position));
    if (room === 0) return 0;
    return (await this.baseOpen()).read(position, into.subarray(0, room));
  }

  async write(position: number, bytes: Uint8Array): Promise<void> {
    const data = await this.materialize(position + bytes.length);
    data.set(bytes, position);
    this.entry.limit = Math.max(this.entry.limit, position + bytes.length);
  }

  async size(): Promise<number> {
    const entry = this.entry;
    if (entry.data !== null) return entry.limit;
    return Math.min(entry.limit, await (await this.baseOpen()).size());
  }

  async sync(): Promise<void> {}

  async truncate(size: number): Promise<void> {
    if (this.entry.data === null && size <= (await this.size())) {
      this.entry.limit = size;
      return;
    }
    const data = await this.materialize(size);
    data.fill(0, Math.min(size, this.entry.limit), size);
    this.entry.limit = size;
  }

  async close(): Promise<void> {
    await this.baseFile?.close();
    this.baseFile = null;
  }

  private async baseOpen(): Promise<DiskFile> {
    if (this.baseFile === null)
      this.baseFile = await this.base.open(this.entry.base as string, "read");
    return this.baseFile;
  }

  /** The entry's bytes in memory, at least `bytes` long (copied from the base on first use). */
  private async materialize(bytes: number): Promise<Uint8Array> {
    const entry = this.entry;
    if (entry.data === null) {
      const length = await this.size();
      const data = new Uint8Array(length);
      let filled = 0;
      while (filled < length) {
        const read = await this.read(filled, data.subarray(filled));
        if (read === 0) break;
        filled += read;
      }
      entry.data = data;
      entry.limit = length;
    }
    if (entry.data.length < bytes) {
      const grown = new Uint8Array(Math.max(bytes, entry.data.length * 2));
      grown.set(entry.data.subarray(0, entry.limit));
      entry.data = grown;
    }
    return entry.data;
  }
}
