/**
 * DenoDisk: the store's Disk over real files with Deno's natives — Deno.open, FsFile.syncData
 * (fdatasync) for files, FsFile.sync (fsync) on an opened directory for creates, renames and
 * removes — and errno failures translated into DiskError codes (Deno's errors carry `code`).
 *
 * Deno's FsFile has no positional read or write: each is a seek then a read or write on the
 * handle's one file offset. The store may have several reads of one file in flight (partition
 * reads of different subscriptions), so every operation on a handle runs after the previous one
 * settled (a promise chain per file); handles of different files still work in parallel. The seek
 * is synchronous (lseek moves an offset, it does no I/O); reads and writes are Deno's async ops.
 */
import {
  type Disk,
  DiskError,
  type DiskFile,
  type DiskSpace,
  type OpenMode,
} from "../store/disk.ts";

/** A Disk over the directory `root` of the real file system. */
export class DenoDisk implements Disk {
  constructor(readonly root: string) {}

  private full(path: string): string {
    return path === "" ? this.root : `${this.root}/${path}`;
  }

  async open(path: string, mode: OpenMode): Promise<DiskFile> {
    const options =
      mode === "read"
        ? { read: true }
        : mode === "write"
          ? { read: true, write: true }
          : { read: true, write: true, create: true, truncate: true, mode: 0o644 };
    try {
      return new DenoFile(path, await Deno.open(this.full(path), options));
    } catch (error) {
      throw toDiskError(error, `open "${path}"`);
    }
  }

  async list(dir: string): Promise<string[]> {
    const names: string[] = [];
    try {
      for await (const entry of Deno.readDir(this.full(dir))) names.push(entry.name);
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return [];
      throw toDiskError(error, `list "${dir}"`);
    }
    return names;
  }

  async mkdir(dir: string): Promise<void> {
    try {
      await Deno.mkdir(this.full(dir), { recursive: true });
    } catch (error) {
      throw toDiskError(error, `mkdir "${dir}"`);
    }
  }

  async remove(path: string): Promise<void> {
    try {
      await Deno.remove(this.full(path));
    } catch (error) {
      if (error instanceof Deno.errors.NotFound) return;
      throw toDiskError(error, `remove "${path}"`);
    }
  }

  async rename(from: string, to: string): Promise<void> {
    try {
      await Deno.rename(this.full(from), this.full(to));
    } catch (error) {
      throw toDiskError(error, `rename "${from}" to "${to}"`);
    }
  }

  async space(): Promise<DiskSpace | null> {
    // Deno has no statfs of its own; its node:fs may have one.
    try {
      const { statfs } = await import("node:fs/promises");
      if (typeof statfs !== "function") return null;
      const stats = await statfs(this.full(""));
      return { freeBytes: stats.bavail * stats.bsize, totalBytes: stats.blocks * stats.bsize };
    } catch {
      return null;
    }
  }

  async syncDir(dir: string): Promise<void> {
    let handle: Deno.FsFile | undefined;
    try {
      handle = await Deno.open(this.full(dir), { read: true });
      await handle.sync();
    } catch (error) {
      throw toDiskError(error, `fsync directory "${dir}"`);
    } finally {
      handle?.close();
    }
  }
}

class DenoFile implements DiskFile {
  /** The last operation on this handle: the next one starts after it settled. */
  private tail: Promise<unknown> = Promise.resolve();

  constructor(
    readonly path: string,
    private readonly handle: Deno.FsFile,
  ) {}

  private serial<T>(what: string, operation: () => Promise<T>): Promise<T> {
    const run = this.tail.then(operation).catch((error: unknown) => {
      throw toDiskError(error, what);
    });
    this.tail = run.catch(() => undefined);
    return run;
  }

  read(position: number, into: Uint8Array): Promise<number> {
    return this.serial(`read "${this.path}" at ${position}`, async () => {
      this.handle.seekSync(position, Deno.SeekMode.Start); // lseek: no I/O, no need for a thread hop
      let done = 0;
      while (done < into.length) {
        const count = await this.handle.read(into.subarray(done));
        if (count === null || count === 0) break;
        done += count;
      }
      return done;
    });
  }

  write(position: number, bytes: Uint8Array): Promise<void> {
    return this.serial(`write "${this.path}" at ${position}`, async () => {
      this.handle.seekSync(position, Deno.SeekMode.Start); // lseek: no I/O, no need for a thread hop
      let done = 0;
      while (done < bytes.length) {
        const count = await this.handle.write(bytes.subarray(done));
        if (count <= 0)
          throw new DiskError("EIO", `write "${this.path}": no progress at ${position + done}`);
        done += count;
      }
    });
  }

  size(): Promise<number> {
    return this.serial(`stat "${this.path}"`, async () => (await this.handle.stat()).size);
  }

  sync(): Promise<void> {
    return this.serial(`fsync "${this.path}"`, () => this.handle.syncData());
  }

  truncate(size: number): Promise<void> {
    return this.serial(`truncate "${this.path}"`, () => this.handle.truncate(size));
  }

  close(): Promise<void> {
    return this.serial(`close "${this.path}"`, async () => this.handle.close());
  }
}

function toDiskError(error: unknown, what: string): DiskError {
  if (error instanceof DiskError) return error;
  const code = (error as { code?: string }).code ?? "EIO";
  return new DiskError(code, `${what}: ${(error as Error).message}`);
}
