/**
 * fsync_bound: what the disk alone allows a writer that waits for durability, timed the way the
 * store commits a group under `--fsync always` (journal_writer.ts): append one group's bytes to a
 * file (`writeNow` when the disk has it, as the store does, else `write`) and `sync` it
 * (fdatasync), round after round. The median round time bounds any `always` writer that waits
 * for one group commit per round: `groupMessages` messages per round at best.
 *
 * Not here: opening the disk (the caller hands in the runtime's Disk on the data directory's file
 * system), the clock (injected), what a benchmark compares the bound with.
 * Invariants: the probe file is the only file it creates, and it is removed before returning,
 * also on failure; every round appends at the file's end (a growing file, as a fresh journal).
 */
import type { Disk } from "../store/mod.ts";
import { median } from "./stats.ts";

/** The probe file's name in the disk's root. */
const PROBE_FILE = "fsync-bound.probe";
/** Unmeasured rounds first: the file's first extents and the code paths warm. */
const WARMUP_ROUNDS = 20;

/** The disk's fsync bound, as one benchmark run measured it. */
export interface FsyncBound {
  /** Bytes appended per round (one group's records). */
  roundBytes: number;
  /** Measured rounds. */
  rounds: number;
  /** Median time of one append + fdatasync, µs. */
  medianUs: number;
  /** 90th percentile (nearest rank) of the same, µs. */
  p90Us: number;
}

/** Messages per second at most, for `groupMessages` messages per commit of `bound.medianUs`. */
export function boundRate(bound: FsyncBound, groupMessages: number): number {
  return (groupMessages * 1e6) / bound.medianUs;
}

/**
 * Times `rounds` rounds of appending `roundBytes` to a fresh file on `disk` and making them
 * durable; `nowMs` is a monotonic clock with sub-millisecond resolution.
 */
export async function measureFsyncBound(
  disk: Disk,
  options: { roundBytes: number; rounds: number; nowMs: () => number },
): Promise<FsyncBound> {
  const bytes = new Uint8Array(options.roundBytes).fill(0x61);
  const file = await disk.open(PROBE_FILE, "create");
  const times: number[] = [];
  try {
    let position = 0;
    for (let round = 0; round < WARMUP_ROUNDS + options.rounds; round++) {
      const started = options.nowMs();
      if (file.writeNow !== undefined) file.writeNow(position, bytes);
      else await file.write(position, bytes);
      await file.sync();
      if (round >= WARMUP_ROUNDS) times.push((options.nowMs() - started) * 1000);
      position += bytes.length;
    }
  } finally {
    await file.close();
    await disk.remove(PROBE_FILE);
  }
  const sorted = [...times].sort((a, b) => a - b);
  return {
    roundBytes: options.roundBytes,
    rounds: options.rounds,
    medianUs: median(sorted),
    p90Us: sorted[Math.max(0, Math.ceil(sorted.length * 0.9) - 1)] ?? Number.NaN,
  };
}
