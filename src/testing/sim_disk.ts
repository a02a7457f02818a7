/**
 * SimDisk: a deterministic in-memory Disk for tests and the simulator, with crash and fault
 * injection. Owns file contents in two layers per file, what is durable and what is current:
 *
 *   durable bytes ──(ops since last sync: write / truncate)──▶ current bytes
 *   durable names ──(ops since last syncDir: create / rename / remove)──▶ current names
 *
 * `sync` replays the file's pending ops onto its durable bytes (cost: bytes written, not file
 * size); `syncDir` does the same for the names of one directory. `crash()` throws away every
 * handle and rebuilds the current state from the durable one plus a Prng-chosen part of the
 * pending ops: a prefix with the last kept write cut at any byte ("prefix"), or any subset, as a
 * page cache flushing out of order would ("subset"). Faults: failing syncs (EIO), a full disk
 * (ENOSPC). Every choice comes from the seeded Prng, so a run replays exactly.
 *
 * Invariants: durable state only changes in sync/syncDir/crash; directories exist once made
 * (mkdir is durable at once: the store makes its directories before anything else).
 */
import {
  type Disk,
  DiskError,
  type DiskFile,
  type MapOptions,
  type OpenHints,
  type OpenMode,
  dirOf,
} from "../store/disk.ts";
import { assert } from "../stdx/assert.ts";
import { Prng } from "../stdx/prng.ts";

type FileOp =
  | { kind: "write"; position: number; bytes: Uint8Array }
  | { kind: "truncate"; size: number };
type NameOp =
  | { kind: "link"; path: string; inode: Inode }
  | { kind: "unlink"; path: string }
  | { kind: "rename"; from: string; to: string; inode: Inode };

/** How a crash treats unsynced writes. */
export type CrashMode = "prefix" | "subset";

class Buffer {
  data = new Uint8Array(64);
  length = 0;

  write(position: number, bytes: Uint8Array): void {
    const end = position + bytes.length;
    if (end > this.data.length) this.grow(end);
    if (position > this.length) this.data.fill(0, this.length, position);
    this.data.set(bytes, position);
    this.length = Math.max(this.length, end);
  }

  truncate(size: number): void {
    if (size > this.data.length) this.grow(size);
    if (size > this.length) this.data.fill(0, this.length, size);
    this.length = size;
  }

  apply(op: FileOp, cutBytes = Infinity): void {
    if (op.kind === "truncate") this.truncate(op.size);
    else
      this.write(
        op.position,
        cutBytes < op.bytes.length ? op.bytes.subarray(0, cutBytes) : op.bytes,
      );
  }

  copy(): Buffer {
    const copy = new Buffer();
    copy.write(0, this.data.subarray(0, this.length));
    return copy;
  }

  private grow(atLeast: number): void {
    const data = new Uint8Array(Math.max(atLeast, this.data.length * 2));
    data.set(this.data.subarray(0, this.length));
    this.data = data;
  }
}

class Inode {
  current = new Buffer();
  durable = new Buffer();
  pending: FileOp[] = [];
}

/** Options of a SimDisk. */
export type SimDiskOptions = { seed?: number };

/** A deterministic in-memory Disk with crashes, torn writes, failing fsyncs and a full disk. */
export class SimDisk implements Disk {
  readonly prng: Prng;
  private names = new Map<string, Inode>();
  private durableNames = new Map<string, Inode>();
  private pendingNames: { dir: string; op: NameOp }[] = [];
  private readonly dirs = new Set<string>([""]);
  private epoch = 0;
  private syncFailures = 0;
  /** Failing file syncs drop the file's unsynced writes from what a later sync makes durable. */
  private failedSyncDrops = false;
  private syncFailureCode = "EIO";
  /** Total current bytes allowed across files; a write beyond fails with ENOSPC. */
  capacityBytes = Infinity;
  /** Counters for tests and benchmarks. */
  readonly stats = { writes: 0, bytesWritten: 0, syncs: 0, dirSyncs: 0, crashes: 0 };

  constructor(options: SimDiskOptions = {}) {
    this.prng = new Prng(options.seed ?? 1);
  }

  /**
   * The Disk operations. `life`: the machine's life the caller belongs to (see view()); an
   * operation still in flight when the power fails then fails instead of landing in the next life.
   */
  async open(path: string, mode: OpenMode, _hints?: OpenHints, life?: number): Promise<DiskFile> {
    await tick();
    this.checkLife(life, path);
    this.checkDir(dirOf(path), path);
    let inode = this.names.get(path);
    if (mode === "create") {
      if (inode !== undefined)
        inode.pending.push({ kind: "truncate", size: 0 }), inode.current.truncate(0);
      else {
        inode = new Inode();
        this.nameOp(path, { kind: "link", path, inode });
      }
    } else if (inode === undefined) {
      throw new DiskError("ENOENT", `open "${path}": no such file`);
    }
    return new SimFile(this, path, inode, this.epoch);
  }

  async list(dir: string, life?: number): Promise<string[]> {
    await tick();
    this.checkLife(life, dir);
    const prefix = dir === "" ? "" : `${dir}/`;
    const out: string[] = [];
    for (const path of this.names.keys()) {
      if (path.startsWith(prefix) && !path.slice(prefix.length).includes("/"))
        out.push(path.slice(prefix.length));
    }
    for (const d of this.dirs) {
      if (d !== "" && d.startsWith(prefix) && !d.slice(prefix.length).includes("/"))
        out.push(d.slice(prefix.length));
    }
    return out.sort();
  }

  async mkdir(dir: string, life?: number): Promise<void> {
    await tick();
    this.checkLife(life, dir);
    const parts = dir.split("/");
    for (let i = 1; i <= parts.length; i++) this.dirs.add(parts.slice(0, i).join("/"));
  }

  async remove(path: string, life?: number): Promise<void> {
    await tick();
    this.checkLife(life, path);
    if (!this.names.has(path)) return;
    this.nameOp(path, { kind: "unlink", path });
  }

  async rename(from: string, to: string, life?: number): Promise<void> {
    await tick();
    this.checkLife(life, from);
    const inode = this.names.get(from);
    if (inode === undefined) throw new DiskError("ENOENT", `rename "${from}": no such file`);
    this.checkDir(dirOf(to), to);
    this.nameOp(to, { kind: "rename", from, to, inode });
  }

  async syncDir(dir: string, life?: number): Promise<void> {
    await tick();
    this.checkLife(life, dir);
    this.failSyncMaybe(`fsync directory "${dir}"`);
    this.stats.dirSyncs++;
    const keep: { dir: string; op: NameOp }[] = [];
    for (const entry of this.pendingNames) {
      if (entry.dir === dir) applyNameOp(this.durableNames, entry.op);
      else keep.push(entry);
    }
    this.pendingNames = keep;
  }

  // ---- Fault injection and inspection (not part of Disk) ------------------------------------

  /**
   * A Disk bound to the current life of the machine: after `crash()` every call through it fails
   * (EBADF), as a killed process can do nothing more. Give each store instance its own view, so
   * a crashed store's background work cannot touch the files its successor recovers — not
   * even by a call made before the crash that would land after it (a remove a sorter issued
   * just before the power failed once took effect in the next life: a journal the recovered
   * store had replayed vanished from under it).
   */
  view(): Disk {
    const life = this.epoch;
    return {
      open: (path, mode) => this.open(path, mode, undefined, life),
      list: (dir) => this.list(dir, life),
      mkdir: (dir) => this.mkdir(dir, life),
      remove: (path) => this.remove(path, life),
      rename: (from, to) => this.rename(from, to, life),
      syncDir: (dir) => this.syncDir(dir, life),
      space: () => this.space(),
    };
  }

  /**
   * Makes the next `count` file or directory syncs fail with EIO (nothing becomes durable).
   * `dropUnsynced`: a failed file sync also loses the file's unsynced writes, as Linux may after
   * a failed fsync (the dirty pages are marked clean, and may be evicted): no later sync makes
   * them durable unless they are written again. Here the file reads as its durable bytes at once
   * (stricter than a page cache that still holds them; keeps pending-free files equal to their
   * durable bytes, which crash() relies on).
   */
  failNextSyncs(
    count = 1,
    options: { dropUnsynced?: boolean; code?: "EIO" | "ENOSPC" } = {},
  ): void {
    this.syncFailures += count;
    this.failedSyncDrops = options.dropUnsynced ?? false;
    this.syncFailureCode = options.code ?? "EIO";
  }

  /** Cancels the sync failures failNextSyncs asked for and not yet used. */
  clearSyncFailures(): void {
    this.syncFailures = 0;
  }

  /** What statfs would say: capacityBytes (or, when unbounded, 2^50) and what is free of it. */
  async space(): Promise<{ freeBytes: number; totalBytes: number }> {
    await tick();
    const totalBytes = Number.isFinite(this.capacityBytes) ? this.capacityBytes : 2 ** 50;
    return { freeBytes: Math.max(0, totalBytes - this.usedBytes()), totalBytes };
  }

  /**
   * Simulates power loss: open handles die; each file keeps its durable bytes plus part of its
   * unsynced writes (a prefix whose last write is cut at a random byte, or a random subset);
   * names keep their durable state plus a random prefix of unsynced creates/renames/removes.
   */
  crash(options: { mode?: CrashMode } = {}): void {
    const mode = options.mode ?? "prefix";
    this.stats.crashes++;
    this.epoch++;
    const prng = this.prng;
    const keptNames = prng.nextInt(this.pendingNames.length + 1);
    for (let i = 0; i < keptNames; i++) applyNameOp(this.durableNames, this.pendingNames[i].op);
    this.pendingNames = [];
    const inodes = new Set<Inode>([...this.names.values(), ...this.durableNames.values()]);
    for (const inode of inodes) {
      const ops = inode.pending;
      if (ops.length === 0) {
        // Nothing unsynced: current already equals durable. Copying every file at every crash
        // made a crash cost the whole disk; the draw stays so runs replay as before.
        if (mode === "prefix") prng.nextInt(1);
        continue;
      }
      const result = inode.durable.copy();
      if (mode === "prefix") {
        const kept = prng.nextInt(ops.length + 1);
        for (let i = 0; i < kept; i++) result.apply(ops[i]);
        if (kept < ops.length && ops[kept].kind === "write") {
          result.apply(
            ops[kept],
            prng.nextInt((ops[kept] as { bytes: Uint8Array }).bytes.length + 1),
          );
        }
      } else {
        for (const op of ops) if (prng.nextInt(2) === 0) result.apply(op);
      }
      inode.current = result;
      inode.durable = result.copy();
      inode.pending = [];
    }
    this.names = new Map(this.durableNames);
  }

  /**
   * Simulates a process crash (kill -9) without power loss: open handles die, but every write so
   * far stays (it is in the kernel's page cache); what was not synced is still not durable.
   */
  kill(): void {
    this.stats.crashes++;
    this.epoch++;
  }

  /** The current bytes of `path` (a copy), or null when it does not exist. */
  snapshot(path: string): Uint8Array | null {
    const inode = this.names.get(path);
    return inode === undefined ? null : inode.current.data.slice(0, inode.current.length);
  }

  /** Overwrites bytes of `path` durably, as bit rot or a stray writer would (for bad-file tests). */
  corrupt(path: string, position: number, bytes: Uint8Array): void {
    const inode = this.names.get(path);
    assert(inode !== undefined, "sim_disk: corrupt of a missing file");
    inode.current.write(position, bytes);
    inode.durable.write(position, bytes);
  }

  /** Cuts `path` to `size` bytes durably (for bad-file tests). */
  cut(path: string, size: number): void {
    const inode = this.names.get(path);
    assert(inode !== undefined, "sim_disk: cut of a missing file");
    inode.current.truncate(size);
    inode.durable.truncate(size);
  }

  /** Removes `path` durably (for bad-file tests). */
  erase(path: string): void {
    this.names.delete(path);
    this.durableNames.delete(path);
  }

  /** Paths of all current files, sorted. */
  paths(): string[] {
    return [...this.names.keys()].sort();
  }

  /** Bytes held by all current files. */
  usedBytes(): number {
    let total = 0;
    for (const inode of new Set(this.names.values())) total += inode.current.length;
    return total;
  }

  // ---- Used by SimFile ------------------------------------------------------------------------

  /** @internal */
  checkEpoch(epoch: number, path: string): void {
    if (epoch !== this.epoch) throw new DiskError("EBADF", `"${path}": handle lost in a crash`);
  }

  /** @internal */
  failSyncMaybe(what: string): void {
    if (this.syncFailures > 0) {
      this.syncFailures--;
      const text = this.syncFailureCode === "EIO" ? "I/O error" : "no space left on device";
      throw new DiskError(this.syncFailureCode, `${what}: injected ${text}`);
    }
  }

  /** @internal */
  dropsOnFailedSync(): boolean {
    return this.failedSyncDrops;
  }

  /** @internal */
  reserve(inode: Inode, end: number, path: string): void {
    const growth = Math.max(0, end - inode.current.length);
    if (growth > 0 && this.usedBytes() + growth > this.capacityBytes) {
      throw new DiskError("ENOSPC", `write "${path}": no space left on device`);
    }
  }

  private nameOp(path: string, op: NameOp): void {
    applyNameOp(this.names, op);
    this.pendingNames.push({ dir: dirOf(path), op });
    if (op.kind === "rename" && dirOf(op.from) !== dirOf(path))
      this.pendingNames.push({ dir: dirOf(op.from), op: { kind: "unlink", path: op.from } });
  }

  /** `life` given (a view's call): fails unless the machine is still in that life. */
  private checkLife(life: number | undefined, what: string): void {
    if (life !== undefined) this.checkEpoch(life, what);
  }

  private checkDir(dir: string, path: string): void {
    if (!this.dirs.has(dir)) throw new DiskError("ENOENT", `"${path}": no such directory "${dir}"`);
  }
}

class SimFile implements DiskFile {
  /** Closed by its owner: any call after it fails, as one on a closed descriptor does. */
  private closed = false;

  constructor(
    private readonly disk: SimDisk,
    readonly path: string,
    private readonly inode: Inode,
    private readonly epoch: number,
  ) {}

  async read(position: number, into: Uint8Array): Promise<number> {
    await tick();
    this.checkOpen();
    this.disk.checkEpoch(this.epoch, this.path);
    const buffer = this.inode.current;
    const count = Math.max(0, Math.min(into.length, buffer.length - position));
    if (count > 0) into.set(buffer.data.subarray(position, position + count));
    return count;
  }

  /**
   * A copy of the current bytes: the store maps only files it never writes again, so a copy reads
   * as a mapping would. `cachedOnly`: a region counts as cached or not by a hash of its position
   * and length (no Prng draw, so runs replay as before), so callers take both of their paths.
   */
  async map(position: number, length: number, options?: MapOptions): Promise<Uint8Array | null> {
    await tick();
    this.checkOpen();
    this.disk.checkEpoch(this.epoch, this.path);
    const buffer = this.inode.current;
    if (position + length > buffer.length) return null;
    if (options?.cachedOnly === true && uncached(position, length)) return null;
    return buffer.data.slice(position, position + length);
  }

  async write(position: number, bytes: Uint8Array): Promise<void> {
    await tick();
    this.writeNow(position, bytes);
  }

  writeNow(position: number, bytes: Uint8Array): void {
    this.checkOpen();
    this.disk.checkEpoch(this.epoch, this.path);
    this.disk.reserve(this.inode, position + bytes.length, this.path);
    const copy = bytes.slice();
    this.inode.current.write(position, copy);
    this.inode.pending.push({ kind: "write", position, bytes: copy });
    this.disk.stats.writes++;
    this.disk.stats.bytesWritten += bytes.length;
  }

  async size(): Promise<number> {
    await tick();
    this.checkOpen();
    this.disk.checkEpoch(this.epoch, this.path);
    return this.inode.current.length;
  }

  async sync(): Promise<void> {
    await tick();
    this.checkOpen();
    this.disk.checkEpoch(this.epoch, this.path);
    try {
      this.disk.failSyncMaybe(`fsync "${this.path}"`);
    } catch (error) {
      if (this.disk.dropsOnFailedSync()) {
        this.inode.current = this.inode.durable.copy();
        this.inode.pending = [];
      }
      throw error;
    }
    this.disk.stats.syncs++;
    for (const op of this.inode.pending) this.inode.durable.apply(op);
    this.inode.pending = [];
  }

  async truncate(size: number): Promise<void> {
    await tick();
    this.checkOpen();
    this.disk.checkEpoch(this.epoch, this.path);
    this.inode.current.truncate(size);
    this.inode.pending.push({ kind: "truncate", size });
  }

  async close(): Promise<void> {
    await tick();
    this.closed = true;
  }

  private checkOpen(): void {
    if (this.closed) throw new DiskError("EBADF", `"${this.path}": used after it was closed`);
  }
}

function applyNameOp(names: Map<string, Inode>, op: NameOp): void {
  if (op.kind === "link") names.set(op.path, op.inode);
  else if (op.kind === "unlink") names.delete(op.path);
  else {
    names.delete(op.from);
    names.set(op.to, op.inode);
  }
}

/** Every SimDisk call yields once, so interleavings look like real async I/O, deterministically. */
function tick(): Promise<void> {
  return Promise.resolve();
}

/**
 * Whether SimDisk counts the region [position, position + length) as not all in the page cache:
 * about half of all regions, by a 32-bit mix of both numbers (multiplying a position by an odd
 * constant, as before, kept its parity below 2^32 and lost every low bit past 2^53 / 2^32).
 */
export function uncached(position: number, length: number): boolean {
  const low = position >>> 0;
  const high = Math.floor(position / 2 ** 32) >>> 0;
  let h = Math.imul(low ^ Math.imul(high, 0x85ebca6b), 0x9e3779b1);
  h = Math.imul(h ^ (h >>> 15) ^ Math.imul(length >>> 0, 0xc2b2ae35), 0x27d4eb2f);
  return (h ^ (h >>> 13)) >>> 31 === 1;
}
