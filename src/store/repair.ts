/**
 * repair: `aria repair`'s work on a data directory the store refused to open — keep every intact
 * record, move damaged bytes aside into `damaged/` (never delete them), make the directory servable
 * and say exactly which seq ranges are lost. Entry point: repairStore.
 *
 * How: the store is opened with `repair` (recovery resyncs past each damaged region and lists the
 * regions and the seqs lost), each damaged region's bytes are copied into `damaged/` before any
 * file changes, and the store is closed with a full sort: every salvaged record then sits in a
 * segment and the damaged journals are drained and retired, so the next open finds nothing to
 * repair (a second repair is a no-op). A dry run does the same on a copy-on-write view of the
 * directory (overlay_disk.ts) and changes nothing.
 *
 * Not here: deciding what is damage (recovery.ts); the command line (src/cli/repair.ts).
 * Invariant: no byte of the directory is deleted or overwritten before its copy in `damaged/` is
 * durable; the next seq after a repair is past every seq seen anywhere.
 */
import type { StoreOptions } from "./context.ts";
import type { Disk } from "./disk.ts";
import { OverlayDisk } from "./overlay_disk.ts";
import type { LostSeqs, MovedRegion, RecoveryReport } from "./recovery.ts";
import { Store } from "./store.ts";

export type { MovedRegion };

/** What repairStore is asked to do. */
export type RepairOptions = StoreOptions & {
  /** Change nothing: report what a repair would do. */
  dryRun?: boolean;
};

/** What repairStore found and did. */
export type RepairReport = {
  dryRun: boolean;
  /** The recovery the repair ran (its problems are the damage found). */
  recovery: RecoveryReport;
  /** Inclusive seq ranges whose records are not in the store after the repair. */
  lostSeqs: LostSeqs[];
  /** Damaged bytes moved into `damaged/` (or that would be, on a dry run). */
  moved: MovedRegion[];
  /** The seq the next publish gets: past every seq seen anywhere. */
  nextSeq: number;
};

/** Repairs the data directory in `disk` (see the head comment); rejects on I/O errors. */
export async function repairStore(disk: Disk, options: RepairOptions = {}): Promise<RepairReport> {
  const { dryRun = false, ...storeOptions } = options;
  const { store, recovery } = await Store.open(dryRun ? new OverlayDisk(disk) : disk, {
    ...storeOptions,
    repair: true,
  });
  // A full sort: every salvaged record goes into a segment, and the damaged journals, drained,
  // are retired (their damaged bytes are in damaged/), so the next open finds nothing to repair.
  // A dry run sorts nothing: its report is recovery's.
  await store.close({ sort: !dryRun });
  return {
    dryRun,
    recovery,
    lostSeqs: recovery.lostSeqs,
    moved: recovery.damaged,
    nextSeq: recovery.nextSeq,
  };
}
