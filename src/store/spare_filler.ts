/**
 * SpareFiller: under `always`, while no spare journal is ready, writes one in the making with
 * zeros, a piece after each group commit, so that a later generation overwrites written blocks
 * instead of growing a file (journal_files.ts: an fdatasync after an overwrite flushes the data
 * alone). Until journals drain into spares (the retained budget, 512 MiB by default), a fresh
 * store's journals would all be new files.
 *
 *   group commit: write ─▶ fsync ─▶ [zero piece ▶ spare in the making] ─▶ wake the publishers
 *
 * Why one piece per commit: the disk is idle between a commit's fsync and the next one (the
 * publishers it wakes append first), so a piece written then costs the next fsync little, where
 * zero-filling beside the commits at its own pace doubled their fsync latency (docs/storage.md,
 * recycled journals). A piece is as long as the commit's bytes, rounded up to 64 KiB, at most
 * 256 KiB (under pipelined publishers the disk is busy with the commits' bytes).
 *
 * The pieces are written past the page cache when the disk can (OpenHints.direct): nothing to
 * write back later, in the middle of other fsyncs. The filled spare joins the spares when whole;
 * a spare found at open is kept as spares are. Its bytes are never read. A failure of the filler
 * (a full disk, say) only stops it: the journal does not depend on it.
 *
 * A spare never takes the last of the free space: every SPARE_SPACE_CHECK_BYTES the filler asks
 * the disk (statfs) and writes nothing while the next that many bytes would leave less free than
 * the reserve, max(2 × journalBytesMax, 5% of the file system): the journal and the sorter need that room
 * more than a faster overwrite later. It tries again at later commits, so filling goes on once
 * space is freed. A disk that cannot tell its space is filled as before.
 */
import { JOURNAL_SPARES_MAX } from "../constants.ts";
import type { StoreContext } from "./context.ts";
import type { DiskFile } from "./disk.ts";
import { keepsSpares } from "./journal_files.ts";
import { sparePath } from "./layout.ts";

const PIECE_ALIGN = 64 * 1024;
const PIECE_BYTES_MAX = 256 * 1024;
/** Blocks written past the page cache must be whole: a spare's length is a multiple of this. */
const BLOCK_BYTES = 4096;
/** Bytes the filler writes between two checks of the free space (see piece). */
export const SPARE_SPACE_CHECK_BYTES = 4 * 1024 * 1024;
/** The share of the file system a spare leaves free at least (see the reserve above). */
const SPARE_RESERVE_FRACTION = 0.05;

/** The free bytes spare filling leaves on a file system of `totalBytes`: see the file's comment. */
export function spareReserveBytes(totalBytes: number, journalBytesMax: number): number {
  return Math.max(2 * journalBytesMax, Math.ceil(totalBytes * SPARE_RESERVE_FRACTION));
}

let zeros: Uint8Array | null = null;

/** Zero-fills a spare journal ahead, one piece per group commit. */
export class SpareFiller {
  private file: DiskFile | null = null;
  private path = "";
  private written = 0;
  private target = 0;
  private writing: Promise<void> | null = null;
  private stopped = false;

  constructor(private readonly context: StoreContext) {}

  /** Bytes of the spare in the making (not yet among the spares). */
  get fillingBytes(): number {
    return this.written;
  }

  /** After a group commit of `bytes`: writes the next piece, if a spare is wanted and no piece is in flight. */
  step(bytes: number): void {
    const context = this.context;
    if (
      !keepsSpares(context) ||
      this.stopped ||
      this.writing !== null ||
      context.failure !== null ||
      context.closed
    )
      return;
    // A large commit's fsync is mostly its bytes' transfer, which an overwrite does not shorten,
    // and the disk is busy with them (pipelined publishers): no piece then.
    if (bytes > PIECE_BYTES_MAX) return;
    if (this.file === null && context.journal.spares.length > 0) return;
    this.writing = this.piece(bytes)
      .catch(() => this.abandon())
      .finally(() => {
        this.writing = null;
      });
  }

  /**
   * The spare in the making, as far as it is written, for a generation that starts now and finds
   * no whole spare (its first part then overwrites zeros, the rest grows the file); the filler
   * starts another. Undefined when nothing is written.
   */
  async handOver(): Promise<{ path: string; bytes: number } | undefined> {
    await this.writing;
    const file = this.file;
    if (file === null || this.written === 0) return undefined;
    this.file = null;
    await file.close().catch(() => {});
    const spare = { path: this.path, bytes: this.written };
    this.written = 0;
    return spare;
  }

  /** After a failed piece: no more filling; the file stays (kept as a spare at the next open). */
  private async abandon(): Promise<void> {
    this.stopped = true;
    const file = this.file;
    this.file = null;
    await file?.close().catch(() => {});
  }

  /** Stops filling (a close): waits for a piece in flight; the spare in the making stays on disk, kept as a spare at the next open. */
  async stop(): Promise<void> {
    this.stopped = true;
    await this.writing;
    await this.abandon();
  }

  /** Pieces not written because the disk was within its reserve (tests, stats). */
  skippedForSpace = 0;
  /** Bytes filled since the last space check that passed (Infinity: check before the next piece). */
  private uncheckedBytes = Number.POSITIVE_INFINITY;

  private async piece(bytes: number): Promise<void> {
    const context = this.context;
    // One statfs per SPARE_SPACE_CHECK_BYTES filled, not per piece (a thread-pool round trip in
    // the gap between two commits): a check passes only with that much room above the reserve.
    if (this.uncheckedBytes >= SPARE_SPACE_CHECK_BYTES) {
      const space = (await context.disk.space?.()) ?? null;
      if (
        space !== null &&
        space.freeBytes - SPARE_SPACE_CHECK_BYTES <
          spareReserveBytes(space.totalBytes, context.options.journalBytesMax)
      ) {
        this.skippedForSpace++;
        return;
      }
      this.uncheckedBytes = 0;
    }
    if (this.file === null) {
      this.path = sparePath(context.journal.nextSpareId++);
      this.target = Math.ceil(context.options.journalBytesMax / BLOCK_BYTES) * BLOCK_BYTES;
      this.written = 0;
      this.file = await context.disk.open(this.path, "create", { direct: true });
    }
    const length = Math.min(
      Math.ceil(Math.max(bytes, 1) / PIECE_ALIGN) * PIECE_ALIGN,
      this.target - this.written,
    );
    zeros ??= new Uint8Array(PIECE_BYTES_MAX);
    await this.file.write(this.written, zeros.subarray(0, length));
    this.written += length;
    this.uncheckedBytes += length;
    if (this.written < this.target) return;
    // Whole: a spare from now on (its blocks' allocation becomes durable with the first fsync of
    // the generation that takes it, or earlier with any commit of the file system's journal).
    const file = this.file;
    this.file = null;
    await file.close();
    this.written = 0;
    // Drained journals may have become spares meanwhile: keep no more than they may be.
    if (context.journal.spares.length >= JOURNAL_SPARES_MAX) await context.disk.remove(this.path);
    else context.journal.spares.push({ path: this.path, bytes: this.target });
  }
}
