/**
 * lane_buffer: the bytes a lane holds and how it gets them — the lowest layer of a lane
 * (lane_buffer → lane_read_ahead → lane). It keeps where the lane is in its files, the buffer
 * holding the current file's bytes, and the first chunk of the next file read ahead, and it
 * performs the read the record walk asked for (`want`): a chunk read, a mapping of cached pages,
 * an index load, or a wait for a read ahead in flight.
 *
 *   file:    ...|<---------------- current file ---------------->|  next file  |
 *   buffer:           [bufferStart, bufferStart + bufferLength)      ahead: [start, +length)
 *                            ^ headAt (offset of the head record in buffer)
 *
 * Does not walk records or pick what to yield (lane.ts), nor decide when to read ahead
 * (lane_read_ahead.ts). Invariants: a buffer this batch's payloads point into (`lent`) is never
 * refilled; only an `owned` buffer (fresh, or from the pool) is written in place — a span view or
 * a mapping is shared or page cache; `view` always covers `buffer`.
 */
import { MAPPED_CHUNKS_MAX, READ_CHUNK_BYTES_MAX, READ_CHUNK_BYTES_MIN } from "../../constants.ts";
import type { StoreContext } from "../context.ts";
import type { TabledImage } from "../decoded_runs.ts";
import { isSubtreeStore } from "../subtree_store_file.ts";
import type { BufferPool } from "./buffer_pool.ts";
import { mapRegion, readChunk } from "./file_access.ts";
import { type FileMeta, isPacked, recordsCrcOf } from "./file_meta.ts";
import { loadIndex } from "./index_cache.ts";
import type { SpanTaker } from "./span_read.ts";

/** What `advance` returns when the lane must read first (its `want` says what). */
export const NEEDS_READ = -1;
/** `want.limit` of a lane waiting for its read ahead in flight (aheadRead); -1 is an index read. */
export const WANT_AHEAD = -2;

/**
 * What a lane asks of its partition read: the time floor of a time read, sparseness, and the bytes
 * of a lane's first read while its reader wants a first message soon (0: a chunk).
 */
export type LaneOwner = {
  timeFloor: number;
  readonly sparse: boolean;
  readonly firstReadBytes: number;
};

/** The first chunk of the next file, read ahead (by a span read or by the lane itself). */
export type AheadChunk = {
  buffer: Uint8Array;
  owned: boolean;
  path: string;
  start: number;
  length: number;
  checked: boolean;
  tabled: TabledImage | null;
};

/** A lane's files, its place in them and the bytes it holds of them; performs its reads. */
export class LaneBuffer implements SpanTaker {
  /** Next seq this lane may yield. */
  nextSeq = 0;
  segmentIndex = 0;
  position = -1;
  pendingIndex = -1;
  buffer: Uint8Array;
  view: DataView;
  bufferPath = "";
  bufferStart = 0;
  bufferLength = 0;
  /**
   * The read `advance` asks for: a chunk of a file of `limit` bytes, or (limit < 0) the index of
   * file `id`.
   */
  want = { path: "", position: 0, bytes: 0, limit: 0, id: 0 };
  headAt = -1;
  headLength = 0;
  headSeq = Infinity;
  /** Payloads of the current batch point into `buffer` (borrowing readers only). */
  lent = false;
  /**
   * `buffer` is the lane's own (fresh, or from the pool): it may be refilled in place, and goes
   * back to the pool once lent. A view of a span read or of a mapped file is neither: its bytes
   * are shared or page cache (a write into a private mapping copies the page).
   */
  owned = false;
  /**
   * files[mapMissed] had pages not in the page cache when mapRecords tried it: it is read from then
   * on.
   */
  protected mapMissed = -1;
  /** The first chunk of the next file, read ahead with other lanes' reads (see lowOnData). */
  ahead: AheadChunk | null = null;
  /** The buffer's image as a span read tabulated it (see decoded_runs.ts), or null. */
  protected tabled: TabledImage | null = null;
  /**
   * A span read in flight that sets `ahead` when it lands (span_read.ts does not wait for it); it
   * never rejects.
   */
  aheadRead: Promise<void> | null = null;
  /**
   * Path of the file holding files[segmentIndex] (built once per file, not per record), its image's
   * offset there and its end.
   */
  protected filePath = "";
  protected fileBase = 0;
  protected fileEnd = 0;
  /** The current file is a small image in a pack: a sparse reader reads it without read-ahead. */
  protected fileSmallInPack = false;
  /** File offset of the current file's first record. */
  protected fileDataStart = 0;
  /** CRC-32 of the current file's records, until checkImage has tried it; -1: none (or tried). */
  protected imageCrc = -1;
  /** Buffer offsets [checkedStart, checkedEnd) hold records checked as a whole by checkImage. */
  protected checkedStart = 0;
  protected checkedEnd = 0;
  /** Bytes of this lane's first read (0: a chunk, as every read after it; see load). */
  protected firstReadBytes: number;

  constructor(
    readonly files: readonly FileMeta[],
    readonly withPending: boolean,
    protected readonly chunkBytes: number,
    protected readonly owner: LaneOwner,
    protected readonly pool: BufferPool | null,
  ) {
    this.buffer = new Uint8Array(0);
    this.view = new DataView(this.buffer.buffer);
    this.firstReadBytes = owner.firstReadBytes;
  }

  /**
   * Bytes to read at `position` of a file of `end` bytes: a chunk of at least `atLeast`, or the
   * rest.
   */
  protected readBytes(position: number, end: number, atLeast: number): number {
    // A reader's first message waits for its first read: that one is small (a 1 MiB chunk took
    // most of the time to a 1% subtree's first message from disk, page cache warm or not).
    const chunk = this.firstReadBytes > 0 ? this.firstReadBytes : this.chunkBytes;
    return Math.min(end - position, Math.max(chunk, READ_CHUNK_BYTES_MIN, atLeast));
  }

  protected request(path: string, position: number, bytes: number, limit: number): number {
    this.want.path = path;
    this.want.position = position;
    this.want.bytes = bytes;
    this.want.limit = limit;
    return NEEDS_READ;
  }

  /**
   * Takes `bytes` (file bytes from `position` of `path`, a view of a span read) for the region
   * spanWant named; `checked`: they are a whole image's records and matched its records CRC.
   */
  acceptSpan(
    path: string,
    position: number,
    bytes: Uint8Array,
    ahead: boolean,
    checked: boolean,
    tabled: TabledImage | null,
  ): void {
    if (ahead) {
      this.ahead = {
        buffer: bytes,
        owned: false,
        path,
        start: position,
        length: bytes.length,
        checked,
        tabled,
      };
      return;
    }
    this.replaceBuffer(bytes, false);
    this.tabled = tabled;
    this.bufferPath = path;
    this.bufferStart = position;
    this.bufferLength = bytes.length;
    this.markChecked(checked);
  }

  /** The buffer's records were (true) checked as a whole already, or (false) not yet. */
  protected markChecked(checked: boolean): void {
    this.checkedStart = 0;
    this.checkedEnd = checked ? this.bufferLength : 0;
    if (checked) this.imageCrc = -1;
  }

  /** Takes over the read buffer of `lane` (its bytes stay valid: files never change in place). */
  inherit(lane: LaneBuffer): void {
    this.buffer = lane.buffer;
    this.view = lane.view;
    this.bufferPath = lane.bufferPath;
    this.bufferStart = lane.bufferStart;
    this.bufferLength = lane.bufferLength;
    this.markChecked(false);
    this.tabled = null;
    this.lent = lane.lent;
    this.owned = lane.owned;
    this.ahead = lane.ahead;
  }

  /** The read-ahead chunk becomes the buffer (the old one may still back this batch's payloads). */
  protected takeAhead(): void {
    const ahead = this.ahead as AheadChunk;
    this.ahead = null;
    this.replaceBuffer(ahead.buffer, ahead.owned);
    this.tabled = ahead.tabled;
    this.bufferPath = ahead.path;
    this.bufferStart = ahead.start;
    this.bufferLength = ahead.length;
    this.markChecked(ahead.checked);
  }

  /** Performs `want`: a chunk of a data file, or an index. */
  async load(context: StoreContext): Promise<void> {
    const want = this.want;
    // The read `want` asks for is the lane's first (its size from readBytes): later ones are chunks.
    if (want.limit >= 0) this.firstReadBytes = 0;
    if (want.limit === WANT_AHEAD) {
      await this.aheadRead;
      return;
    }
    if (want.limit < 0) {
      await loadIndex(context, want);
      return;
    }
    if (await this.mapRecords(context)) return;
    // The buffer's bytes from the wanted position on (a record cut by the buffer's end, or the
    // unread part a top-up keeps) are moved, not read again.
    const bufferEnd = this.bufferStart + this.bufferLength;
    const kept =
      want.path === this.bufferPath &&
      want.position >= this.bufferStart &&
      want.position < bufferEnd
        ? bufferEnd - want.position
        : 0;
    const bytes = Math.min(
      want.limit - want.position,
      Math.max(want.bytes, kept + READ_CHUNK_BYTES_MIN),
    );
    const from = this.buffer;
    const keptAt = want.position - this.bufferStart;
    // Never refill a buffer this batch's payloads point into.
    if (this.buffer.length < bytes || this.lent || !this.owned)
      this.replaceBuffer(
        this.freshBuffer(Math.max(bytes, Math.min(this.chunkBytes, READ_CHUNK_BYTES_MAX))),
        true,
      );
    if (kept > 0) {
      if (from === this.buffer) this.buffer.copyWithin(0, keptAt, keptAt + kept);
      else this.buffer.set(from.subarray(keptAt, keptAt + kept));
    }
    const random = this.owner.sparse && this.fileSmallInPack && want.path === this.filePath;
    const read =
      kept < bytes
        ? await readChunk(
            context,
            want.path,
            want.position + kept,
            this.buffer.subarray(kept, bytes),
            want.limit,
            random,
          )
        : 0;
    this.bufferPath = want.path;
    this.bufferStart = want.position;
    this.bufferLength = kept + read;
    this.markChecked(false);
    // The buffer may be the old one refilled in place (a copying reader's): no table describes it.
    this.tabled = null;
  }

  /**
   * Performs `want` by mapping, when it is records of the current file (a packed segment or a
   * subtree store, never written again; not a journal), the disk maps files and the region's
   * pages are all in the page cache: no copy into a buffer, no buffer. The first read of a file
   * maps the chunk asked for; a lane that comes back to the file for more maps all that is left
   * of it, from the image's first record when its buffer began there (those pages are cached
   * already), so that one CRC checks the whole image (checkImage). A read that stops early pays
   * for a chunk; a long one maps each file at most twice. Warm, copying into read buffers and a
   * CRC per record cost a visible share of a whole-stream read
   * (docs/benchmarks.md#storage-issue-3).
   *
   * False (the caller reads): the disk does not map; the file is a small image a sparse reader
   * reads without read-ahead; or some of the region is not cached, and then the rest of the file
   * is read without another try (each try costs a mapping and a mincore). Mapping cold regions
   * with their pages read in first (DiskFile.map without cachedOnly) was no faster: the copy into
   * the prefetch's scratch buffer costs what the copy into a read buffer does.
   */
  private async mapRecords(context: StoreContext): Promise<boolean> {
    const want = this.want;
    if (
      this.segmentIndex >= this.files.length ||
      want.path !== this.filePath ||
      this.mapMissed === this.segmentIndex ||
      (this.owner.sparse && this.fileSmallInPack)
    )
      return false;
    const file = this.files[this.segmentIndex];
    if (!isPacked(file) && !isSubtreeStore(file)) return false;
    const again = this.bufferPath === want.path;
    // Coming back: the rest of the file, at most MAPPED_CHUNKS_MAX chunks of it (a subtree store
    // has no size limit, and the lane's offsets into its buffer are int32s), from the image's
    // first record when the whole image fits.
    const most = MAPPED_CHUNKS_MAX * Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN);
    const whole =
      again && this.bufferStart <= this.fileDataStart && this.fileEnd - this.fileDataStart <= most;
    const start = whole ? this.fileDataStart : want.position;
    const end = whole
      ? this.fileEnd
      : again
        ? Math.min(this.fileEnd, start + Math.max(most, want.bytes))
        : Math.min(want.limit, want.position + want.bytes);
    const bytes = await mapRegion(
      context,
      want.path,
      start,
      end,
      again ? this.bufferStart : 0,
      again ? this.bufferLength : 0,
    );
    if (bytes === null) {
      this.mapMissed = this.segmentIndex;
      return false;
    }
    this.replaceBuffer(bytes, false);
    this.bufferPath = want.path;
    this.bufferStart = start;
    this.bufferLength = bytes.length;
    this.markChecked(false);
    if (start === this.fileDataStart && end === this.fileEnd) this.imageCrc = recordsCrcOf(file);
    return true;
  }

  /** A buffer of at least `bytes` that nothing points into: from the pool when borrowing. */
  protected freshBuffer(bytes: number): Uint8Array {
    return this.pool === null ? new Uint8Array(bytes) : this.pool.take(bytes);
  }

  /**
   * Makes `buffer` (`owned`: see owned) the lane's (empty) buffer; the old one goes back to the
   * pool after this batch if lent and the lane's own.
   */
  protected replaceBuffer(buffer: Uint8Array, owned: boolean): void {
    if (this.pool !== null && this.lent && this.owned) this.pool.lend(this.buffer);
    this.lent = false;
    this.owned = owned;
    this.buffer = buffer;
    this.view = new DataView(buffer.buffer, buffer.byteOffset, buffer.length);
    this.bufferPath = "";
    this.tabled = null;
  }
}
