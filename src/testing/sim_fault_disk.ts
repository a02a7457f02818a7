/**
 * FaultDisk: the Disk one simulated server process sees — a SimDisk view (dead after a crash)
 * wrapped to (1) hash every write into the run's trace and (2) crash the machine or the process
 * at an exact disk operation, so a crash can land in the middle of a flush, a segment close or a
 * recovery, deterministically (the op count is the clock of I/O).
 *
 * It owns no state of the disk: SimDisk does. Ops are counted across lives (the counter belongs
 * to the simulator), so "crash at op N" means the same instant in every replay.
 */
import { type Disk, DiskError, type DiskFile, type OpenMode } from "../store/disk.ts";
import type { TraceHash } from "./sim_trace.ts";

/** Shared by every FaultDisk of one run. */
export class DiskOpClock {
  ops = 0;
  /** The op at which `onCrash` fires, or Infinity. */
  crashAtOp = Infinity;
  /** Crashes the world (SimDisk.crash or kill, connections dead); set by the simulator. */
  onCrash: () => void = () => {};

  /** Counts one op; crashes when its time has come (the op then fails as the process is gone). */
  tick(what: string): void {
    this.ops++;
    if (this.ops >= this.crashAtOp) {
      this.crashAtOp = Infinity;
      this.onCrash();
      throw new DiskError("EBADF", `${what}: the process crashed`);
    }
  }
}

/** Whether the process that owns a FaultDisk is still running. */
export type LifeToken = { alive: boolean };

/** Wraps `disk` (a SimDisk view) with write tracing and op-counted crashes. */
export function faultDisk(
  disk: Disk,
  opClock: DiskOpClock,
  trace: TraceHash,
  life: LifeToken,
): Disk {
  // A dead process's leftover work fails at once and does not count: the view would fail it anyway.
  const clock = {
    tick(what: string): void {
      if (!life.alive) throw new DiskError("EBADF", `${what}: the process is gone`);
      opClock.tick(what);
    },
  };
  const wrapFile = (file: DiskFile): DiskFile => ({
    path: file.path,
    read: async (position, into) => (clock.tick(file.path), file.read(position, into)),
    write: async (position, bytes) => {
      clock.tick(file.path);
      trace.text(file.path);
      trace.number(position);
      trace.update(bytes);
      return file.write(position, bytes);
    },
    size: async () => (clock.tick(file.path), file.size()),
    sync: async () => (clock.tick(file.path), file.sync()),
    truncate: async (size) => {
      clock.tick(file.path);
      trace.text(`truncate ${file.path}`);
      trace.number(size);
      return file.truncate(size);
    },
    close: () => file.close(),
  });
  return {
    open: async (path: string, mode: OpenMode) => {
      clock.tick(path);
      return wrapFile(await disk.open(path, mode));
    },
    list: async (dir) => (clock.tick(dir), disk.list(dir)),
    mkdir: async (dir) => (clock.tick(dir), disk.mkdir(dir)),
    remove: async (path) => (clock.tick(path), trace.text(`remove ${path}`), disk.remove(path)),
    rename: async (from, to) => (
      clock.tick(from), trace.text(`rename ${from} ${to}`), disk.rename(from, to)
    ),
    syncDir: async (dir) => (clock.tick(dir), disk.syncDir(dir)),
  };
}
