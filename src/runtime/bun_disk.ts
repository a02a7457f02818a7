/**
 * BunDisk: the store's Disk over real files (node:fs/promises, as Bun implements it).
 * Owns the mapping of relative paths to the data directory, real fsync of files and of
 * directories (Linux needs a directory fsync for a create, rename or remove to survive a crash),
 * the translation of errno failures into DiskError codes, and the mapping of immutable files
 * (`DiskFile.map`). Holds no state besides the root.
 */
import { constants, promises as fs, writeSync } from "node:fs";
import { join } from "node:path";
import {
  type Disk,
  DiskError,
  type DiskFile,
  type DiskSpace,
  type MapOptions,
  type OpenHints,
  type OpenMode,
} from "../store/disk.ts";

/** posix_fadvise's advice that reads are random: the kernel reads only what is asked, no read-ahead. */
const POSIX_FADV_RANDOM = 1;

type Libc = {
  posixFadvise: (fd: number, advice: number) => void;
  mincore: (address: number, length: number, vector: Uint8Array) => number;
  pageBytes: number;
  address: (view: Uint8Array) => number;
};
let libc: Libc | null | undefined;

/**
 * The libc calls this disk makes (posix_fadvise, mincore, the page size) through Bun's FFI,
 * loaded on first use: this module also loads under Deno, which never calls them. Null where
 * libc or FFI is missing; callers then do without (the hints are advice).
 */
function loadLibc(): Libc | null {
  if (libc === undefined) {
    try {
      const { dlopen, FFIType, ptr } = require("bun:ffi") as typeof import("bun:ffi");
      const { symbols } = dlopen("libc.so.6", {
        posix_fadvise: {
          args: [FFIType.i32, FFIType.i64, FFIType.i64, FFIType.i32],
          returns: FFIType.i32,
        },
        mincore: { args: [FFIType.ptr, FFIType.u64, FFIType.ptr], returns: FFIType.i32 },
        getpagesize: { args: [], returns: FFIType.i32 },
      });
      libc = {
        posixFadvise: (fd, advice) => {
          symbols.posix_fadvise(fd, 0, 0, advice);
        },
        mincore: (address, length, vector) => symbols.mincore(address, length, vector),
        pageBytes: symbols.getpagesize(),
        address: (view) => ptr(view),
      };
    } catch {
      libc = null;
    }
  }
  return libc;
}

/** Turns the kernel's read-ahead off for `fd`; nothing where libc is missing. */
function adviseRandom(fd: number): void {
  loadLibc()?.posixFadvise(fd, POSIX_FADV_RANDOM);
}

/**
 * Reads that bring a mapped region's pages into the page cache go in pieces of this size,
 * PREFETCH_IN_FLIGHT of them at a time, into one scratch buffer they all share: their bytes are
 * never looked at (the mapping shows them), so reads into the same memory at once do no harm.
 * Each piece's successor is issued by its completion, on the event loop's thread, so with the
 * loop busy (a merge between pauses) several pieces in flight keep the disk busy where one would
 * not (figures: docs/benchmarks.md#design-notes-figures-moved-from-code-comments).
 */
const PREFETCH_PIECE_BYTES = 1024 * 1024;
const PREFETCH_IN_FLIGHT = 4;
let prefetchScratch: Uint8Array | null = null;

/**
 * The parts of `view` (bytes of a mapped file) whose pages are not in the page cache, as start,
 * end pairs of offsets into it (page-aligned inside it); all of it where mincore is missing or
 * fails.
 */
export function missingRuns(view: Uint8Array): number[] {
  const c = loadLibc();
  if (view.length === 0) return [];
  if (c === null) return [0, view.length];
  const page = c.pageBytes;
  const address = c.address(view);
  const first = address - (address % page);
  const vector = new Uint8Array(Math.ceil((address + view.length - first) / page));
  if (c.mincore(first, address + view.length - first, vector) !== 0) return [0, view.length];
  // Runs found by the typed array's native indexOf, not a loop per page: a loop over the 16,384
  // pages of a 64 MiB region was compiled twice by the optimizing JIT (~27 ms of compiler time)
  // in a process's first whole-stream read. A page is resident when its byte is 1 (the other
  // bits are reserved): one with a reserved bit set counts as resident, and is faulted in on use.
  const runs: number[] = [];
  for (let i = vector.indexOf(0); i >= 0; ) {
    const j = vector.indexOf(1, i + 1);
    const end = j < 0 ? vector.length : j;
    runs.push(
      Math.max(0, first + i * page - address),
      Math.min(view.length, first + end * page - address),
    );
    i = j < 0 ? -1 : vector.indexOf(0, j + 1);
  }
  return runs;
}

/**
 * Opens with O_DIRECT when asked and the platform has it; a file system that refuses it (tmpfs:
 * EINVAL) gets a plain handle.
 */
async function openMaybeDirect(
  absolute: string,
  flags: number,
  direct: boolean,
): Promise<fs.FileHandle> {
  const directFlag = (constants as { O_DIRECT?: number }).O_DIRECT;
  if (direct && directFlag !== undefined) {
    try {
      return await fs.open(absolute, flags | directFlag, 0o644);
    } catch (error) {
      if ((error as { code?: string }).code !== "EINVAL") throw error;
    }
  }
  return fs.open(absolute, flags, 0o644);
}

/** A Disk over the directory `root` of the real file system. */
export class BunDisk implements Disk {
  constructor(readonly root: string) {}

  async open(path: string, mode: OpenMode, hints?: OpenHints): Promise<DiskFile> {
    const flags =
      mode === "read"
        ? constants.O_RDONLY
        : mode === "write"
          ? constants.O_RDWR
          : constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC;
    try {
      const handle = await openMaybeDirect(join(this.root, path), flags, hints?.direct === true);
      if (hints?.random === true) adviseRandom(handle.fd);
      return new BunFile(path, join(this.root, path), handle);
    } catch (error) {
      throw toDiskError(error, `open "${path}"`);
    }
  }

  async list(dir: string): Promise<string[]> {
    try {
      return await fs.readdir(join(this.root, dir));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return [];
      throw toDiskError(error, `list "${dir}"`);
    }
  }

  async mkdir(dir: string): Promise<void> {
    try {
      await fs.mkdir(join(this.root, dir), { recursive: true });
    } catch (error) {
      throw toDiskError(error, `mkdir "${dir}"`);
    }
  }

  async remove(path: string): Promise<void> {
    try {
      await fs.unlink(join(this.root, path));
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === "ENOENT") return;
      throw toDiskError(error, `remove "${path}"`);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    try {
      await fs.rename(join(this.root, from), join(this.root, to));
    } catch (error) {
      throw toDiskError(error, `rename "${from}" to "${to}"`);
    }
  }

  async space(): Promise<DiskSpace | null> {
    try {
      const stats = await fs.statfs(this.root);
      return { freeBytes: stats.bavail * stats.bsize, totalBytes: stats.blocks * stats.bsize };
    } catch {
      return null;
    }
  }

  async syncDir(dir: string): Promise<void> {
    let handle: fs.FileHandle | undefined;
    try {
      handle = await fs.open(join(this.root, dir), constants.O_RDONLY);
      await handle.sync();
    } catch (error) {
      throw toDiskError(error, `fsync directory "${dir}"`);
    } finally {
      await handle?.close();
    }
  }
}

class BunFile implements DiskFile {
  constructor(
    readonly path: string,
    private readonly absolute: string,
    private readonly handle: fs.FileHandle,
  ) {}

  /**
   * Maps the region (Bun.mmap, private) and reads its pages that are not in the page cache
   * through a scratch buffer, on the thread pool, so that touching the view then waits for no
   * I/O on the event loop's thread. A read into fresh memory faults every 4 KiB page of it in; a
   * mapping of cached pages costs a fault per 64 KiB (the kernel's fault-around). The mapping
   * lives as long as views of it: a region of its own per call, so nothing stays mapped once its
   * readers let go.
   */
  async map(position: number, length: number, options?: MapOptions): Promise<Uint8Array | null> {
    if (typeof Bun === "undefined") return null;
    let mapping: Uint8Array;
    try {
      mapping = Bun.mmap(this.absolute, { offset: position, size: length, shared: false });
    } catch {
      return null;
    }
    // Bun maps no further than the end of the file: a shorter region is a file that ends early.
    if (mapping.length < length) return null;
    const runs = missingRuns(mapping);
    if (runs.length === 0) return mapping;
    if (options?.cachedOnly === true) return null;
    const pieces: number[] = [];
    for (let i = 0; i < runs.length; i += 2)
      for (let at = runs[i]; at < runs[i + 1]; at += PREFETCH_PIECE_BYTES)
        pieces.push(at, Math.min(PREFETCH_PIECE_BYTES, runs[i + 1] - at));
    const scratch = (prefetchScratch ??= new Uint8Array(PREFETCH_PIECE_BYTES));
    let next = 0;
    const reader = async () => {
      while (next < pieces.length) {
        const k = next;
        next += 2;
        await this.read(position + pieces[k], scratch.subarray(0, pieces[k + 1]));
      }
    };
    await Promise.all(Array.from({ length: PREFETCH_IN_FLIGHT }, reader));
    return mapping;
  }

  async read(position: number, into: Uint8Array): Promise<number> {
    try {
      const { bytesRead } = await this.handle.read(into, 0, into.length, position);
      return bytesRead;
    } catch (error) {
      throw toDiskError(error, `read "${this.path}" at ${position}`);
    }
  }

  async write(position: number, bytes: Uint8Array): Promise<void> {
    try {
      let done = 0;
      while (done < bytes.length) {
        const { bytesWritten } = await this.handle.write(
          bytes,
          done,
          bytes.length - done,
          position + done,
        );
        if (bytesWritten <= 0)
          throw new DiskError("EIO", `write "${this.path}": no progress at ${position + done}`);
        done += bytesWritten;
      }
    } catch (error) {
      throw toDiskError(error, `write "${this.path}" at ${position}`);
    }
  }

  writeNow(position: number, bytes: Uint8Array): void {
    try {
      let done = 0;
      while (done < bytes.length) {
        const written = writeSync(
          this.handle.fd,
          bytes,
          done,
          bytes.length - done,
          position + done,
        );
        if (written <= 0)
          throw new DiskError("EIO", `write "${this.path}": no progress at ${position + done}`);
        done += written;
      }
    } catch (error) {
      throw toDiskError(error, `write "${this.path}" at ${position}`);
    }
  }

  async size(): Promise<number> {
    try {
      return (await this.handle.stat()).size;
    } catch (error) {
      throw toDiskError(error, `stat "${this.path}"`);
    }
  }

  async sync(): Promise<void> {
    try {
      await this.handle.datasync();
    } catch (error) {
      throw toDiskError(error, `fsync "${this.path}"`);
    }
  }

  async truncate(size: number): Promise<void> {
    try {
      await this.handle.truncate(size);
    } catch (error) {
      throw toDiskError(error, `truncate "${this.path}"`);
    }
  }

  async close(): Promise<void> {
    try {
      await this.handle.close();
    } catch (error) {
      throw toDiskError(error, `close "${this.path}"`);
    }
  }
}

function toDiskError(error: unknown, what: string): DiskError {
  if (error instanceof DiskError) return error;
  const code = (error as NodeJS.ErrnoException).code ?? "EIO";
  return new DiskError(code, `${what}: ${(error as Error).message}`);
}
