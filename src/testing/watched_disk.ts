/**
 * WatchedDisk: a Disk over another that reports what its files read and map (path, position,
 * bytes) to hooks, and can hide mapping (`maps: false`: its files have no `map`, so callers read). For the
 * store benchmark, which counts the bytes a read takes from the disk, and for tests that check
 * which way a read went. Everything else passes through unchanged, open hints included.
 */
import type { Disk, DiskFile, OpenHints, OpenMode } from "../store/disk.ts";

export type DiskWatch = {
  /** After each read of `path` at `position` that returned `bytes`. */
  read?: (path: string, position: number, bytes: number) => void;
  /** After each mapping of `bytes` of `path` at `position` that was given (not null). */
  map?: (path: string, position: number, bytes: number) => void;
  /** False: files without `map`. */
  maps?: boolean;
};

export class WatchedDisk implements Disk {
  constructor(
    private readonly inner: Disk,
    private readonly watch: DiskWatch = {},
  ) {}

  async open(path: string, mode: OpenMode, hints?: OpenHints): Promise<DiskFile> {
    const file = await this.inner.open(path, mode, hints);
    const { read, map, maps } = this.watch;
    return {
      path: file.path,
      async read(position, into) {
        const n = await file.read(position, into);
        read?.(path, position, n);
        return n;
      },
      write: (position, bytes) => file.write(position, bytes),
      writeNow:
        file.writeNow === undefined
          ? undefined
          : (position, bytes) => file.writeNow!(position, bytes),
      map:
        maps === false || file.map === undefined
          ? undefined
          : async (position, length, options) => {
              const bytes = await file.map!(position, length, options);
              if (bytes !== null) map?.(path, position, bytes.length);
              return bytes;
            },
      size: () => file.size(),
      sync: () => file.sync(),
      truncate: (size) => file.truncate(size),
      close: () => file.close(),
    };
  }

  list = (dir: string) => this.inner.list(dir);
  mkdir = (dir: string) => this.inner.mkdir(dir);
  remove = (path: string) => this.inner.remove(path);
  rename = (from: string, to: string) => this.inner.rename(from, to);
  syncDir = (dir: string) => this.inner.syncDir(dir);
}
