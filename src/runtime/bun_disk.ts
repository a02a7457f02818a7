/**
 * BunDisk: the store's Disk over real files (node:fs/promises, as Bun implements it).
 * Owns the mapping of relative paths to the data directory, real fsync of files and of
 * directories (Linux needs a directory fsync for a create, rename or remove to survive a crash),
 * and the translation of errno failures into DiskError codes. Holds no state besides the root.
 */
import { constants, promises as fs, writeSync } from "node:fs";
import { join } from "node:path";
import { type Disk, DiskError, type DiskFile, type OpenHints, type OpenMode } from "../store/disk.ts";

/** posix_fadvise's advice that reads are random: the kernel reads only what is asked, no read-ahead. */
const POSIX_FADV_RANDOM = 1;
let fadviseRandom: ((fd: number) => void) | null | undefined;

/**
 * Turns the kernel's read-ahead off for `fd` (posix_fadvise through libc with Bun's FFI, loaded
 * on first use: this module also loads under Deno, which never calls it). Where libc or FFI is
 * missing it does nothing: the hint is advice.
 */
function adviseRandom(fd: number): void {
  if (fadviseRandom === undefined) {
    try {
      const { dlopen, FFIType } = require("bun:ffi") as typeof import("bun:ffi");
      const libc = dlopen("libc.so.6", { posix_fadvise: { args: [FFIType.i32, FFIType.i64, FFIType.i64, FFIType.i32], returns: FFIType.i32 } });
      fadviseRandom = (descriptor) => {
        libc.symbols.posix_fadvise(descriptor, 0, 0, POSIX_FADV_RANDOM);
      };
    } catch {
      fadviseRandom = null;
    }
  }
  fadviseRandom?.(fd);
}

/** A Disk over the directory `root` of the real file system. */
export class BunDisk implements Disk {
  constructor(readonly root: string) {}

  async open(path: string, mode: OpenMode, hints?: OpenHints): Promise<DiskFile> {
    const flags = mode === "read" ? constants.O_RDONLY : mode === "write" ? constants.O_RDWR : constants.O_RDWR | constants.O_CREAT | constants.O_TRUNC;
    try {
      const handle = await fs.open(join(this.root, path), flags, 0o644);
      if (hints?.random === true) adviseRandom(handle.fd);
      return new BunFile(path, handle);
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
    private readonly handle: fs.FileHandle,
  ) {}

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
        const { bytesWritten } = await this.handle.write(bytes, done, bytes.length - done, position + done);
        if (bytesWritten <= 0) throw new DiskError("EIO", `write "${this.path}": no progress at ${position + done}`);
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
        const written = writeSync(this.handle.fd, bytes, done, bytes.length - done, position + done);
        if (written <= 0) throw new DiskError("EIO", `write "${this.path}": no progress at ${position + done}`);
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
