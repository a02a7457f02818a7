/**
 * StoreReader: reads a filter's messages from disk in seq order, from a seq or a time, by an
 * n-way merge over the partitions the filter touches (only those are ever opened). Each
 * partition is one cursor: its closed segments (sought through their sparse index), then its
 * records still in the journal. A min-heap on the cursors' next seqs picks the next message.
 *
 *   cursor(app/a) : [seg 12][seg 40] journal… ─┐
 *   cursor(app/b) : [seg 13] journal…         ─┼─ heap on next seq ─▶ batch of messages
 *   cursor(ops/x) : journal…                  ─┘
 *
 * Reads stop at the store's committed seq; an empty batch means "caught up, ask again later".
 * A reader is resumable: it continues after `lastSeq`, and `store.read(filter, {afterSeq})`
 * starts a new one at the same place. Between batches a cursor keeps only positions; when its
 * partition changed (a segment closed or retired), it seeks again from its next seq.
 *
 * A split partition's cursor merges the subtree stores that hold matching topics (and only
 * those) with the segments and journal records after them: see PartitionCursor.
 *
 * Invariants: a cursor yields strictly increasing seqs, each >= its resume seq; the heap holds
 * one key per cursor (Infinity: nothing more for now); no file is removed while a batch runs.
 */
import {
  READ_BATCH_MESSAGES_MAX,
  READ_CHUNK_BYTES_MAX,
  READ_CONCURRENCY_MAX,
  READ_CHUNK_BYTES_MIN,
  STORE_INDEXES_CACHED_MAX,
} from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { forEachConcurrently } from "../stdx/concurrently.ts";
import { BinaryHeap, CalendarQueue, type MergeHeap } from "../merge/mod.ts";
import { type Filter, isUnder } from "../topic/mod.ts";
import type { StoreContext } from "./context.ts";
import { StoreError } from "./layout.ts";
import type { PartitionLog } from "./partition_log.ts";
import {
  RECORD_INCOMPLETE,
  type StoredMessage,
  checkRecord,
  RECORD_PAYLOAD_BYTES_OFFSET,
  RECORD_TOPIC_BYTES_OFFSET,
  RECORD_TOPIC_OFFSET,
  recordPayload,
  recordBytes,
  recordProblem,
  recordSeq,
  recordTime,
  recordTopic,
  recordTopicEquals,
} from "./record.ts";
import {
  BorrowedMessage,
  DecodedRuns,
  RecordTable,
  type TabledImage,
  asSeq,
} from "./decoded_runs.ts";
import { readFully } from "./disk.ts";
import {
  type SegmentIndex,
  type SegmentMeta,
  decodeSegmentIndex,
  seekIndex,
} from "./segment_index.ts";
import {
  type SubtreeStoreMeta,
  dataBaseOf,
  indexSpanOf,
  isStore,
  recordSpanOf,
} from "./store_file.ts";

/** Where a read starts: at a seq, after a seq (resume), or at the first message at or after a time. */
export type ReadFrom = { seq: number } | { afterSeq: number } | { timeUs: number };

/**
 * Options of a read. `borrow`: a batch's payloads are views into the reader's buffers, valid
 * only until the next `nextBatch()` call (no copy per message; the broker encodes each batch
 * into frames at once). Without it every payload is a copy the caller may keep.
 */
export type ReadOptions = { batchBytesMax?: number; borrow?: boolean };

const NEEDS_READ = -1;
/** Recent topics a lane keeps, so interleaved topics of one partition are not decoded per record. */
const LANE_TOPICS_KEPT = 8;

/**
 * The read buffers of a borrowing reader: a buffer that payloads of the current batch point into
 * is never refilled; its lane takes another, and the lent ones come back when the next batch
 * starts. Buffers come in power-of-two sizes, one free stack per size, so taking one scans
 * nothing (a single free list was scanned for a large-enough buffer: thousands of entries when
 * thousands of lanes read files of different sizes). Keeps at most `keepBytes` free.
 */
class BufferPool {
  private readonly free = new Map<number, Uint8Array[]>();
  private lent: Uint8Array[] = [];
  private freeBytes = 0;

  constructor(private readonly keepBytes: number) {}

  /** A buffer of at least `bytes` (the next power of two). */
  take(bytes: number): Uint8Array {
    const size = bytes <= 1 ? 1 : 2 ** Math.ceil(Math.log2(bytes));
    const buffer = this.free.get(size)?.pop();
    if (buffer === undefined) return new Uint8Array(size);
    this.freeBytes -= size;
    return buffer;
  }

  /** `buffer` (one the pool gave) holds payloads handed out in this batch: reusable from the next batch on. */
  lend(buffer: Uint8Array): void {
    this.lent.push(buffer);
  }

  /** A new batch starts: the previous batch's views are dead, their buffers free again. */
  release(): void {
    for (const buffer of this.lent) {
      if (this.freeBytes + buffer.length > this.keepBytes) continue;
      let stack = this.free.get(buffer.length);
      if (stack === undefined) this.free.set(buffer.length, (stack = []));
      stack.push(buffer);
      this.freeBytes += buffer.length;
    }
    this.lent = [];
  }
}

type FileMeta = SegmentMeta | SubtreeStoreMeta;

/**
 * One seq-ordered run of files a partition cursor merges: a subtree store, or the partition's
 * segments followed by its journal records. Holds positions and one read buffer.
 */
class Lane {
  /** Next seq this lane may yield. */
  nextSeq: number;
  segmentIndex = 0;
  position = -1;
  pendingIndex = -1;
  buffer: Uint8Array;
  view: DataView;
  bufferPath = "";
  bufferStart = 0;
  bufferLength = 0;
  /** The read `advance` asks for: a chunk of a file of `limit` bytes, or (limit < 0) the index of file `id`. */
  want = { path: "", position: 0, bytes: 0, limit: 0, id: 0 };
  headAt = -1;
  headLength = 0;
  headSeq = Infinity;
  topicCache = "";
  topicMatches = false;
  private readonly seenTopics: string[] = [];
  private readonly seenMatches: boolean[] = [];
  private seenNext = 0;
  /** Payloads of the current batch point into `buffer` (borrowing readers only). */
  lent = false;
  /**
   * `buffer` is the lane's own (fresh, or from the pool): it may be refilled in place, and goes
   * back to the pool once lent. A view of a span read or of a mapped file is neither: its bytes
   * are shared or page cache (a write into a private mapping copies the page).
   */
  owned = false;
  /** files[mapMissed] had pages not in the page cache when mapRecords tried it: it is read from then on. */
  private mapMissed = -1;
  /** The first chunk of the next file, read ahead with other lanes' reads (see lowOnData). */
  ahead: {
    buffer: Uint8Array;
    owned: boolean;
    path: string;
    start: number;
    length: number;
    checked: boolean;
    tabled: TabledImage | null;
  } | null = null;
  /** The buffer's image as a span read tabulated it (see decoded_runs.ts), or null. */
  private tabled: TabledImage | null = null;
  /** A span read in flight that sets `ahead` when it lands (StoreReader.readSpans does not wait for it); it never rejects. */
  aheadRead: Promise<void> | null = null;
  /** Path of the file holding files[segmentIndex] (built once per file, not per record), its image's offset there and its end. */
  private filePath = "";
  private fileBase = 0;
  private fileEnd = 0;
  /** The current file is a small image in a pack: a sparse reader reads it without read-ahead. */
  private fileSmallInPack = false;
  /** File offset of the current file's first record. */
  private fileDataStart = 0;
  /** CRC-32 of the current file's records, until checkImage has tried it; -1: none (or tried). */
  private imageCrc = -1;
  /** Buffer offsets [checkedStart, checkedEnd) hold records checked as a whole by checkImage. */
  private checkedStart = 0;
  private checkedEnd = 0;

  constructor(
    readonly log: PartitionLog,
    readonly files: readonly FileMeta[],
    readonly withPending: boolean,
    private readonly filter: Filter,
    private readonly matchesAll: boolean,
    from: { nextSeq: number; timeFloor: number },
    private readonly chunkBytes: number,
    private readonly owner: { timeFloor: number; readonly sparse: boolean },
    private readonly pool: BufferPool | null,
  ) {
    this.nextSeq = from.nextSeq;
    this.buffer = new Uint8Array(0);
    this.view = new DataView(this.buffer.buffer);
    const files_ = this.files;
    let lo = 0;
    let hi = files_.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (files_[mid].lastSeq < this.nextSeq) lo = mid + 1;
      else hi = mid;
    }
    // A time read: the first file holding a record at or after the time. A file's lastTimeUs is
    // the largest time in it, and need not rise from file to file (a clock that stepped back):
    // a binary search on it skipped past every matching file.
    while (lo < files_.length && files_[lo].lastTimeUs < from.timeFloor) lo++;
    this.segmentIndex = lo;
  }

  /**
   * Moves to the next record to yield (seq <= limit): its seq, Infinity when there is none yet,
   * or NEEDS_READ with `want` set (the caller reads, then calls again). No I/O here.
   */
  advance(context: StoreContext, limit: number): number {
    if (this.headAt >= 0) return this.headSeq;
    const log = this.log;
    const files = this.files;
    while (this.segmentIndex < files.length) {
      const file = files[this.segmentIndex];
      if (this.position < 0) {
        const timeFloor = this.owner.timeFloor;
        const span = recordSpanOf(file);
        this.filePath = span.path;
        this.fileBase = dataBaseOf(file);
        this.fileEnd = span.end;
        this.fileSmallInPack = smallInPack(file);
        this.fileDataStart = span.dataStart;
        this.imageCrc = recordsCrcOf(file);
        this.checkedEnd = 0;
        if (timeFloor === -Infinity && this.nextSeq <= file.firstSeq) {
          // The whole file is wanted: no index to read.
          this.position = span.dataStart;
        } else {
          const index = context.indexes.get(file.id);
          if (index === undefined) {
            const at = indexSpanOf(file);
            this.want.id = file.id;
            return this.request(at.path, at.position, at.bytes, -1);
          }
          const target = timeFloor > -Infinity ? { timeUs: timeFloor } : { seq: this.nextSeq };
          this.position =
            index === null ? span.dataStart : this.fileBase + seekIndex(index, target);
        }
      }
      if (this.position >= this.fileEnd) {
        this.segmentIndex++;
        this.position = -1;
        continue;
      }
      const at = this.recordAt(context, this.filePath, this.position, this.fileEnd);
      if (at === NEEDS_READ) return NEEDS_READ;
      // Stop at the batch's limit here too, not only in the journal: a segment the sorter closed
      // (or a store a split switched in) while this batch awaited a read may hold later seqs, and
      // yielding them would pass over other partitions' records at or below them, still pending.
      if (recordSeq(this.view, at) > limit) return Infinity;
      const length = this.view.getUint32(at, true);
      this.position += length;
      if (this.consider(at, length)) return this.headSeq;
    }
    if (!this.withPending) return Infinity;
    if (this.pendingIndex < 0) this.pendingIndex = log.pendingAfter(this.nextSeq - 1);
    while (this.pendingIndex < log.pendingTail) {
      const i = this.pendingIndex;
      const seq = log.pendingSeq(i);
      if (seq > limit) return Infinity;
      if (log.pendingTime(i) < this.owner.timeFloor) {
        this.pendingIndex++;
        continue;
      }
      const journal = context.journal(log.pendingGen(i));
      const at = this.recordAt(context, journal.path, log.pendingPosition(i), journal.bytes);
      if (at === NEEDS_READ) return NEEDS_READ;
      this.pendingIndex++;
      if (this.consider(at, log.pendingLength(i))) return this.headSeq;
    }
    return Infinity;
  }

  /** The current head as a message; the lane moves past it. */
  take(into: BorrowedMessage | null): StoredMessage {
    assert(this.headAt >= 0, "reader: take without a head");
    const at = this.headAt;
    let message: StoredMessage;
    if (into === null) {
      message = {
        seq: this.headSeq,
        timeUs: recordTime(this.view, at),
        topic: this.topicCache,
        payload: recordPayload(this.buffer, this.view, at),
      };
    } else {
      into.seq = this.headSeq;
      into.timeUs = recordTime(this.view, at);
      into.topic = this.topicCache;
      into.source = this.buffer;
      into.start =
        at + RECORD_TOPIC_OFFSET + this.view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
      into.length = this.view.getUint32(at + RECORD_PAYLOAD_BYTES_OFFSET, true);
      this.lent = true;
      message = into;
    }
    this.nextSeq = this.headSeq + 1;
    this.headAt = -1;
    this.headSeq = Infinity;
    return message;
  }

  /**
   * Makes the head and the records after it in its tabulated image (see decoded_runs.ts), up to
   * `limit`, the run of merge source `source`. The last of them stays the head (the lane's reads
   * and reads ahead go on as if the run had been taken); false (nothing changed) when the head's
   * image has no table or no record after the head qualifies.
   */
  decodeRun(runs: DecodedRuns, source: number, limit: number): boolean {
    const tabled = this.tabled;
    if (
      tabled === null ||
      this.headAt < 0 ||
      this.bufferPath !== this.filePath ||
      this.segmentIndex >= this.files.length
    )
      return false;
    // A tabulated image is a whole one (a span region from its first record to its end): while its
    // run is pending the lane's top-ups can only read the next file ahead, never into this buffer.
    assert(
      this.bufferStart + this.bufferLength >= this.fileEnd,
      "reader: a run of an image not all in the buffer",
    );
    const table = tabled.table;
    const at = tabled.shift + this.headAt;
    const head = table.indexOf(at, tabled.first, tabled.end);
    if (table.offsets[head] !== at) return false;
    let last = head;
    while (last + 1 < tabled.end && table.seqs[last + 1] <= limit) last++;
    if (last === head) return false;
    runs.begin(source, table, head, last, this.topicCache);
    this.nextSeq = asSeq(table.seqs[last - 1] + 1);
    this.headAt = (table.offsets[last] - tabled.shift) | 0;
    this.headLength = recordBytes(this.topicCache.length, table.payloadBytes[last]);
    this.headSeq = asSeq(table.seqs[last]);
    this.position = this.bufferStart + this.headAt + this.headLength;
    if (this.pool !== null) this.lent = true;
    return true;
  }

  /** Sets the lane back to the record of `seq` at `position` of its current file (a run not taken to its end). */
  rewind(seq: number, position: number): void {
    this.position = position;
    this.nextSeq = seq;
    this.headAt = -1;
    this.headSeq = Infinity;
  }

  /** Decides whether the checked record at `at` is yielded; sets the head when it is. */
  private consider(at: number, length: number): boolean {
    const seq = recordSeq(this.view, at);
    if (seq < this.nextSeq || recordTime(this.view, at) < this.owner.timeFloor) return false;
    if (!recordTopicEquals(this.buffer, this.view, at, this.topicCache)) this.switchTopic(at);
    if (!this.topicMatches) return false;
    this.headAt = at;
    this.headLength = length;
    this.headSeq = seq;
    return true;
  }

  /**
   * Sets topicCache to the topic of the record at `at`: one of the last LANE_TOPICS_KEPT topics
   * when it is one (a partition's topics interleave: no string built per record), else decoded.
   */
  private switchTopic(at: number): void {
    const seen = this.seenTopics;
    for (let i = 0; i < seen.length; i++) {
      if (recordTopicEquals(this.buffer, this.view, at, seen[i])) {
        this.topicCache = seen[i];
        this.topicMatches = this.seenMatches[i];
        return;
      }
    }
    const topic = recordTopic(this.buffer, this.view, at);
    const matches = this.matchesAll || this.filter.matches(topic);
    const slot = seen.length < LANE_TOPICS_KEPT ? seen.length : this.seenNext++ % LANE_TOPICS_KEPT;
    seen[slot] = topic;
    this.seenMatches[slot] = matches;
    this.topicCache = topic;
    this.topicMatches = matches;
  }

  /** Offset in `buffer` of the checked record at `position` of `path`, or NEEDS_READ. */
  private recordAt(context: StoreContext, path: string, position: number, end: number): number {
    if (this.bufferPath === path && position >= this.bufferStart) {
      const offset = position - this.bufferStart;
      if (offset < this.bufferLength) {
        // `| 0`: the offset reaches the DataView as an int32. File positions (which may pass
        // 2^31) are doubles in optimized code once any of them was, and a DataView read at a
        // double offset left JavaScriptCore's optimized code on every call ("Uncountable" OSR
        // exits, never recompiled): from the second read in a process on, a 10,000-partition
        // whole-stream read ran at ~250-300 MB/s instead of ~550-650.
        const at = offset | 0;
        if (this.imageCrc !== -1 && path === this.filePath) this.checkImage(context);
        const length = checkRecord(
          this.buffer,
          this.view,
          at,
          this.bufferLength,
          context.crc32,
          at >= this.checkedStart && at < this.checkedEnd,
        );
        if (length > 0) return at;
        if (length !== RECORD_INCOMPLETE) throw corrupt(path, position, recordProblem(length));
      }
      if (this.bufferStart + this.bufferLength >= end)
        throw corrupt(path, position, "record cut short");
    }
    return this.missed(context, path, position, end);
  }

  /**
   * Once per file, at its first record found in the buffer: when the buffer holds all of the
   * file's records (a packed image read whole, as span reads do), checks them with one CRC over
   * them all (the one the manifest keeps) instead of one per record; a 10,000-partition
   * whole-stream read spent over a third of its time in per-record CRC calls. On a mismatch the
   * records are checked one by one, and the first damaged one is reported with its offset.
   */
  private checkImage(context: StoreContext): void {
    const start = this.fileDataStart - this.bufferStart;
    const end = this.fileEnd - this.bufferStart;
    if (
      start >= 0 &&
      end <= this.bufferLength &&
      context.crc32(this.buffer.subarray(start, end)) === this.imageCrc
    ) {
      this.checkedStart = start;
      this.checkedEnd = end;
    }
    this.imageCrc = -1;
  }

  /** The buffer does not hold the record: the read-ahead chunk does, or a read is needed. */
  private missed(context: StoreContext, path: string, position: number, end: number): number {
    const ahead = this.ahead;
    if (
      this.bufferPath !== path &&
      ahead !== null &&
      ahead.path === path &&
      position >= ahead.start
    ) {
      this.takeAhead();
      return this.recordAt(context, path, position, end);
    }
    // The read ahead is still in flight: wait for it (load), then look again.
    if (this.aheadRead !== null) return this.request(path, position, 0, WANT_AHEAD);
    let recordBytes = 0;
    if (
      this.bufferPath === path &&
      position >= this.bufferStart &&
      position - this.bufferStart + 4 <= this.bufferLength
    ) {
      recordBytes = this.view.getUint32(position - this.bufferStart, true);
    }
    return this.request(path, position, this.readBytes(position, end, recordBytes), end);
  }

  /** Bytes to read at `position` of a file of `end` bytes: a chunk of at least `atLeast`, or the rest. */
  private readBytes(position: number, end: number, atLeast: number): number {
    return Math.min(end - position, Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN, atLeast));
  }

  private request(path: string, position: number, bytes: number, limit: number): number {
    this.want.path = path;
    this.want.position = position;
    this.want.bytes = bytes;
    this.want.limit = limit;
    return NEEDS_READ;
  }

  /**
   * The region of a pack this lane would take from a span read (see StoreReader.readSpans): the
   * read `advance` asked for, when it starts a packed segment's data with nothing kept in the
   * buffer, or the first data of the next file, when lowOnData would read it ahead. Null otherwise.
   */
  spanWant(): Omit<SpanRequest, "lane"> | null {
    const want = this.want;
    if (this.headAt < 0) {
      // The read `advance` asked for: data of the current file, nothing of it kept in the buffer.
      if (want.limit < 0 || this.segmentIndex >= this.files.length || want.path !== this.filePath)
        return null;
      if (
        want.path === this.bufferPath &&
        want.position >= this.bufferStart &&
        want.position < this.bufferStart + this.bufferLength
      ) {
        // The read came (a span the batch just read): the next file may be read ahead already.
        return this.readsAheadEarly()
          ? this.spanRegion(this.files[this.segmentIndex + 1], null, true)
          : null;
      }
      return this.spanRegion(this.files[this.segmentIndex], want.position, false);
    }
    if (
      !(this.lowOnData() || this.readsAheadEarly()) ||
      this.bufferStart + this.bufferLength < this.fileEnd
    )
      return null;
    const next = this.files[this.segmentIndex + 1];
    return this.spanRegion(next, null, true);
  }

  /**
   * The region from `from` (null: its first record) of packed `file` this lane would take from a
   * span read, or null when `file` is not packed.
   */
  private spanRegion(
    file: FileMeta,
    from: number | null,
    ahead: boolean,
  ): Omit<SpanRequest, "lane"> | null {
    if ("topics" in file || file.pack === undefined) return null;
    const { path, dataStart, end } = recordSpanOf(file);
    const position = from ?? dataStart;
    const regionEnd = Math.min(
      end,
      position + SPAN_SHARE_CHUNKS * Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN),
    );
    // The next image of the pack starts after this one's index image.
    const next = regionEnd === end ? end + file.pack.indexBytes : -1;
    const whole = position === dataStart && regionEnd === end;
    const recordsCrc = whole ? recordsCrcOf(file) : -1;
    return {
      path,
      position,
      end: regionEnd,
      ahead,
      fromStart: position === dataStart,
      imageStart: file.pack.offset,
      next,
      recordsCrc,
    };
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
  private markChecked(checked: boolean): void {
    this.checkedStart = 0;
    this.checkedEnd = checked ? this.bufferLength : 0;
    if (checked) this.imageCrc = -1;
  }

  /** Takes over the read buffer of `lane` (its bytes stay valid: files never change in place). */
  inherit(lane: Lane): void {
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

  /**
   * True when the head is a record of a segment or store whose unread part is mostly not in the
   * buffer, or whose file ends within the buffer soon with a next file to read from its start: a
   * read now (with other cursors' reads, at batch start) spares a read later that the merge would
   * have to wait for alone. (Without the next file's read ahead, a whole-stream read of 10,000
   * partitions with two segments each waited alone 10,000 times, 190 µs each: over half its time.)
   */
  lowOnData(): boolean {
    if (
      this.headAt < 0 ||
      this.segmentIndex >= this.files.length ||
      this.bufferPath !== this.filePath
    )
      return false;
    const end = this.fileEnd;
    const bufferEnd = this.bufferStart + this.bufferLength;
    const threshold = Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN) / 4;
    if (bufferEnd < end) return bufferEnd - (this.bufferStart + this.headAt) < threshold;
    if (this.ahead !== null || this.aheadRead !== null || !this.nextFileFromStart()) return false;
    return end - (this.bufferStart + this.headAt) < threshold;
  }

  /**
   * The current file is all in the buffer and the next one is packed and read from its start:
   * it is read ahead now, not when a few records are left. The partitions of a sort batch all
   * reach their next images near the same seq, and reads ahead started a few records before
   * that left the merge waiting for ~270 MB (a 10,000-partition read); begun early, those span
   * reads overlap the merge of the current images. Such a read ahead is only ever part of a
   * span read (never waited for); a lane whose next image is not read with others' reads it
   * ahead when low on data (lowOnData, topUp), as before: begun early, a read of its own would
   * be waited for at a batch start. Not for a sparse reader, whose lanes' images lie apart.
   */
  readsAheadEarly(): boolean {
    if (
      this.segmentIndex >= this.files.length ||
      this.bufferPath !== this.filePath ||
      this.bufferStart + this.bufferLength < this.fileEnd
    )
      return false;
    if (
      this.ahead !== null ||
      this.aheadRead !== null ||
      this.owner.sparse ||
      !this.nextFileFromStart()
    )
      return false;
    return isPacked(this.files[this.segmentIndex + 1]);
  }

  /** Reads what lowOnData found short: a chunk from the head record on, or the next file's first. */
  async topUp(context: StoreContext): Promise<void> {
    const position = this.bufferStart + this.headAt;
    const end = this.fileEnd;
    if (this.bufferStart + this.bufferLength >= end) return this.readAhead(context);
    this.request(this.filePath, position, this.readBytes(position, end, this.headLength), end);
    await this.load(context);
    // The buffer starts at the head, or before it (a mapping of the whole image: mapRecords).
    this.headAt = (position - this.bufferStart) | 0;
  }

  /** True when the lane will read the file after the current one from its first record. */
  private nextFileFromStart(): boolean {
    // Bounds checked before the access: a read past the array's end left optimized code
    // (an "OutOfBounds" exit, hundreds per whole-stream read until recompiled).
    const i = this.segmentIndex + 1;
    if (i >= this.files.length) return false;
    const next = this.files[i];
    return this.owner.timeFloor === -Infinity && next.firstSeq >= this.nextSeq;
  }

  private async readAhead(context: StoreContext): Promise<void> {
    const next = this.files[this.segmentIndex + 1];
    const { path, dataStart, end } = recordSpanOf(next);
    const bytes = this.readBytes(dataStart, end, 0);
    const random = this.owner.sparse && smallInPack(next);
    const mapped = random
      ? null
      : await mapRegion(context, path, dataStart, dataStart + bytes, 0, 0);
    if (mapped !== null) {
      this.ahead = {
        buffer: mapped,
        owned: false,
        path,
        start: dataStart,
        length: mapped.length,
        checked: false,
        tabled: null,
      };
      return;
    }
    const buffer = this.freshBuffer(bytes);
    const read = await readChunk(context, path, dataStart, buffer.subarray(0, bytes), end, random);
    this.ahead = {
      buffer,
      owned: true,
      path,
      start: dataStart,
      length: read,
      checked: false,
      tabled: null,
    };
  }

  /** The read-ahead chunk becomes the buffer (the old one may still back this batch's payloads). */
  private takeAhead(): void {
    const ahead = this.ahead as NonNullable<typeof this.ahead>;
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
   * for a chunk; a long one maps each file at most twice. Warm, a whole-stream read of 10
   * partitions (1 MiB chunks of 6 MB images) spent a sixth of its samples in the kernel's copy
   * into read buffers, and ran a CRC per record.
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
    if (!isPacked(file) && !isStore(file)) return false;
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
  private freshBuffer(bytes: number): Uint8Array {
    return this.pool === null ? new Uint8Array(bytes) : this.pool.take(bytes);
  }

  /** Makes `buffer` (`owned`: see Lane.owned) the lane's (empty) buffer; the old one goes back to the pool after this batch if lent and the lane's own. */
  private replaceBuffer(buffer: Uint8Array, owned: boolean): void {
    if (this.pool !== null && this.lent && this.owned) this.pool.lend(this.buffer);
    this.lent = false;
    this.owned = owned;
    this.buffer = buffer;
    this.view = new DataView(buffer.buffer, buffer.byteOffset, buffer.length);
    this.bufferPath = "";
    this.tabled = null;
  }
}

/**
 * Reads `into.length` bytes of `path` at `position` (a file of `limit` bytes) and counts them;
 * short reads are corruption. `random`: through the file's handle without read-ahead.
 */
async function readChunk(
  context: StoreContext,
  path: string,
  position: number,
  into: Uint8Array,
  limit: number,
  random = false,
): Promise<number> {
  const read = await context.files.with(
    path,
    (file) => readFully(file, position, into),
    random ? RANDOM_ACCESS : undefined,
  );
  if (read < into.length)
    throw corrupt(path, position + read, `file ends early (expected ${limit} bytes)`);
  context.bytesRead += read;
  return read;
}

/**
 * The bytes [start, end) of `path` mapped when all of them are in the page cache (see
 * DiskFile.map), counted as read but for the `keptLength` bytes from `keptStart` a lane had read
 * already; null otherwise (the caller reads them).
 */
async function mapRegion(
  context: StoreContext,
  path: string,
  start: number,
  end: number,
  keptStart: number,
  keptLength: number,
): Promise<Uint8Array | null> {
  const bytes = await context.files.with(path, (file) =>
    file.map === undefined ? null : file.map(start, end - start, CACHED_ONLY),
  );
  if (bytes === null) return null;
  context.bytesRead +=
    end - start - Math.max(0, Math.min(end, keptStart + keptLength) - Math.max(start, keptStart));
  return bytes;
}

/**
 * One partition's part of a read: a lane per subtree store holding a matching topic (stores
 * holding none are never opened), and a lane for the segments and journal records after them,
 * merged by seq (a linear min: a filter matches few stores of a partition). When the partition's
 * layout changes (a segment closed or retired, a split switched) the lanes are rebuilt from the
 * next seq the partition may yield.
 */
class PartitionCursor {
  version = -1;
  /** Next seq this partition may yield. */
  nextSeq: number;
  /** Until the first yield of a time-based read: skip records older than this. */
  timeFloor: number;
  private lanes: Lane[] = [];
  private headLane = -1;
  private loading: Lane | null = null;
  readonly matchesAll: boolean;

  constructor(
    readonly log: PartitionLog,
    private readonly filter: Filter,
    from: ReadFrom,
    private readonly chunkBytes: number,
    private readonly storeMatches: Map<number, number>,
    private readonly pool: BufferPool | null,
    private readonly access: { sparse: boolean },
  ) {
    this.nextSeq = "seq" in from ? from.seq : "afterSeq" in from ? from.afterSeq + 1 : 1;
    this.timeFloor = "timeUs" in from ? from.timeUs : -Infinity;
    this.matchesAll = filter.entries.some(
      (entry) => entry.kind === "subtree" && isUnder(log.name, entry.prefix),
    );
  }

  /** The reader reads few of the store's partitions (see StoreReader.access). */
  get sparse(): boolean {
    return this.access.sparse;
  }

  private rebuild(): void {
    this.version = this.log.version;
    const old = this.lanes;
    this.lanes = [];
    this.headLane = -1;
    const from = { nextSeq: this.nextSeq, timeFloor: this.timeFloor };
    for (const store of this.log.stores) {
      if (store.lastSeq < this.nextSeq) continue;
      const match = this.matchOf(store);
      if (match === MATCH_NONE) continue;
      this.lanes.push(
        new Lane(
          this.log,
          [store],
          false,
          this.filter,
          match === MATCH_ALL,
          from,
          this.chunkBytes,
          this,
          this.pool,
        ),
      );
    }
    this.lanes.push(
      new Lane(
        this.log,
        this.log.segments,
        true,
        this.filter,
        this.matchesAll,
        from,
        this.chunkBytes,
        this,
        this.pool,
      ),
    );
    // Keep what the old lanes read: a journal chunk or store chunk is still valid bytes.
    for (const lane of old) {
      const heir = lane.withPending
        ? this.lanes[this.lanes.length - 1]
        : this.lanes.find((fresh) => !fresh.withPending && fresh.files[0].id === lane.files[0].id);
      if (heir !== undefined && heir.bufferPath === "" && lane.bufferPath !== "")
        heir.inherit(lane);
    }
  }

  /** Whether `store` holds none, some or only topics of the filter (cached per reader). */
  private matchOf(store: SubtreeStoreMeta): number {
    if (this.matchesAll) return MATCH_ALL;
    let match = this.storeMatches.get(store.id);
    if (match === undefined) {
      let count = 0;
      for (const topic of store.topics) if (this.filter.matches(topic)) count++;
      match = count === 0 ? MATCH_NONE : count === store.topics.length ? MATCH_ALL : MATCH_SOME;
      this.storeMatches.set(store.id, match);
    }
    return match;
  }

  /** The seq of the partition's next record to yield, Infinity for none yet, or NEEDS_READ. */
  advance(context: StoreContext, limit: number): number {
    if (this.version !== this.log.version) this.rebuild();
    let best = Infinity;
    let bestLane = -1;
    const lanes = this.lanes;
    for (let i = 0; i < lanes.length; i++) {
      const key = lanes[i].advance(context, limit);
      if (key === NEEDS_READ) {
        this.loading = lanes[i];
        return NEEDS_READ;
      }
      if (key < best) {
        best = key;
        bestLane = i;
      }
    }
    this.headLane = bestLane;
    return best;
  }

  /** The head as a message; the partition moves past it. */
  take(into: BorrowedMessage | null): StoredMessage {
    assert(this.headLane >= 0, "reader: take without a head");
    const message = this.lanes[this.headLane].take(into);
    this.nextSeq = message.seq + 1;
    this.headLane = -1;
    if (this.timeFloor > -Infinity) {
      // A time read yields everything after its first match: other lanes may have skipped older-
      // timed records beyond it (a clock stepped back), so they seek again by seq.
      this.timeFloor = -Infinity;
      if (this.lanes.length > 1) this.version = -1;
    }
    return message;
  }

  /**
   * Moves the head and the records after it into a run of `runs` (see Lane.decodeRun): only a
   * partition of one lane, past a time read's first message.
   */
  decodeRun(runs: DecodedRuns, source: number, limit: number): boolean {
    if (this.headLane !== 0 || this.lanes.length !== 1 || this.timeFloor !== -Infinity)
      return false;
    const lane = this.lanes[0];
    if (!lane.decodeRun(runs, source, limit)) return false;
    this.nextSeq = lane.nextSeq;
    return true;
  }

  /** Sets the partition back to the first record of its run not taken (its seq and file offset). */
  rewind(seq: number, position: number): void {
    assert(this.lanes.length === 1, "reader: rewind of a partition of several lanes");
    this.lanes[0].rewind(seq, position);
    this.headLane = -1;
    this.nextSeq = seq;
  }

  /**
   * True when a lane's head sits near the end of what it has read (see Lane.lowOnData), or a
   * lane could read its next image ahead with others (Lane.readsAheadEarly): the batch start
   * then offers its read to a span.
   */
  lowOnData(): boolean {
    for (const lane of this.lanes) if (lane.lowOnData() || lane.readsAheadEarly()) return true;
    return false;
  }

  /** Lanes whose next read could come from a span read, with their regions (see Lane.spanWant). */
  spanWants(into: SpanRequest[]): void {
    for (const lane of this.lanes) {
      if (lane.headAt < 0 && lane !== this.loading) continue;
      const want = lane.spanWant();
      if (want !== null) into.push({ lane, ...want });
    }
  }

  /** Tops up every lane low on data. */
  async topUp(context: StoreContext): Promise<void> {
    for (const lane of this.lanes) if (lane.lowOnData()) await lane.topUp(context);
  }

  /** Performs the read the last advance asked for. */
  load(context: StoreContext): Promise<void> {
    const lane = this.loading;
    assert(lane !== null, "reader: load without a request");
    this.loading = null;
    return lane.load(context);
  }
}

/**
 * A lane's region [position, end) of a pack, to be read together with its neighbours'
 * (StoreReader.readSpans). `imageStart`: where its segment's image starts; `fromStart`: the
 * region starts at the image's first record; `next`: where the pack's next image starts, when
 * the region runs to the end of its segment (else -1). A span joins B after A only when
 * A.next = B.imageStart and B starts from its image's start: what lies between them is A's
 * index image and B's file header, never another segment's records. `recordsCrc`: the CRC-32
 * of the region's records when the region is a whole packed image, else -1.
 */
type SpanRequest = {
  lane: Lane;
  path: string;
  position: number;
  end: number;
  ahead: boolean;
  fromStart: boolean;
  imageStart: number;
  next: number;
  recordsCrc: number;
};

/** Cursors from which a reader whose seqs are dense merges with a calendar queue (StoreReader.batch). */
const CALENDAR_CURSORS_MIN = 256;
/** Cursors of a merge from which on their records are decoded ahead in runs (see decoded_runs.ts). */
const RUN_CURSORS_MIN = 256;

/** `want.limit` of a lane waiting for its read ahead in flight (Lane.aheadRead); -1 is an index read. */
const WANT_AHEAD = -2;

const RANDOM_ACCESS = { random: true };
const CACHED_ONLY = { cachedOnly: true };
/**
 * Images in a pack smaller than this are read without the kernel's read-ahead by a sparse reader
 * (see StoreReader.access): read-ahead past them reads other partitions' data (this VM's disk
 * reads ahead 8 MiB: a 1% subtree's cold replay read 26 MiB from the device for 5.7 MiB); a
 * larger image's own bytes gain more from it than the tail costs.
 */
const SMALL_IMAGE_BYTES = 4 * 1024 * 1024;
/** A reader is sparse when the partitions it reads are at most this fraction of the store's. */
const SPARSE_PARTITIONS_SHARE = 1 / 8;

function isPacked(file: FileMeta): boolean {
  return !isStore(file) && file.pack !== undefined;
}

/** The CRC-32 of `file`'s records as the manifest keeps it (packed images), else -1. */
function recordsCrcOf(file: FileMeta): number {
  return isStore(file) ? -1 : (file.pack?.recordsCrc ?? -1);
}

function smallInPack(file: FileMeta): boolean {
  return !("topics" in file) && file.pack !== undefined && file.bytes < SMALL_IMAGE_BYTES;
}

/** The largest span read (one allocation). */
const SPAN_BYTES_MAX = 64 * 1024 * 1024;
/**
 * A lane maps at most this many chunks of a file at once (256 MiB with 1 MiB chunks, so a packed
 * image, at most a segment of 64 MiB, is mapped whole; a large subtree store in pieces).
 */
const MAPPED_CHUNKS_MAX = 256;
/** A lane's share of a span, in its read chunks: with a chunk of 16 KiB (10,000 cursors), whole segments of up to 32 KiB (a lane then holds no more than its chunk and its read-ahead chunk would). */
const SPAN_SHARE_CHUNKS = 2;

const MATCH_NONE = 0;
const MATCH_SOME = 1;
const MATCH_ALL = 2;

function corrupt(path: string, offset: number, what: string): StoreError {
  return new StoreError(
    "ARIA_ERR_STORE_CORRUPT",
    `Cannot read "${path}": ${what} at offset ${offset}`,
  );
}

/** Loads the index of file `id`: `bytes` at `position` of `path` (bytes < 0: the whole file). */
async function loadIndex(
  context: StoreContext,
  want: { id: number; path: string; position: number; bytes: number },
): Promise<void> {
  const id = want.id;
  let index: SegmentIndex | null = null;
  try {
    const bytes = await context.files.with(want.path, async (file) => {
      const into = new Uint8Array(want.bytes < 0 ? await file.size() : want.bytes);
      return into.subarray(0, await readFully(file, want.position, into));
    });
    const decoded = decodeSegmentIndex(bytes, context.crc32);
    // An unreadable index costs a scan from the segment's start, not an error.
    index = typeof decoded === "string" ? null : decoded;
  } catch {
    index = null;
  }
  const cache = context.indexes;
  cache.set(id, index);
  const max = STORE_INDEXES_CACHED_MAX;
  if (cache.size > max) {
    for (const key of cache.keys()) {
      cache.delete(key);
      if (cache.size <= max) break;
    }
  }
}

/** A pull reader of one filter's messages in seq order. */
export class StoreReader {
  private readonly cursors: PartitionCursor[] = [];
  /** Per store id: whether it holds none, some or only matching topics. */
  private readonly storeMatches = new Map<number, number>();
  /**
   * Whether this reader reads few of the store's partitions (a 1% subtree): then the small
   * packed images it reads are read without the kernel's read-ahead, which would read the
   * neighbouring partitions' images it never wants. A dense reader wants them soon: kept.
   */
  private readonly access = { sparse: false };
  private partitionsSeen = 0;
  private heap: MergeHeap = new BinaryHeap(16);
  /** Records decoded ahead per cursor, once the cursors are many (see decoded_runs.ts); null before. */
  private runs: DecodedRuns | null = null;
  private keys = new Float64Array(16);
  /** The last batch's seqs were dense (most seqs in its range were this reader's): merge with a calendar queue. */
  private denseKeys = false;
  /**
   * What the merge of the last batch left, for the next one to resume from: the limit and the
   * store's layout version it ran under (-1: nothing to resume), and the cursors it took
   * messages from (`touched`, each once: `touchedIn` holds the batch number that listed it).
   */
  private resumeLimit = -1;
  private resumeLayout = -1;
  private touched = new Int32Array(16);
  private touchedCount = 0;
  private touchedIn = new Int32Array(16);
  private batches = 0;
  /** Batches that resumed the last one's merge (see batch). */
  private resumed = 0;
  private spansReadAhead = 0;
  /** Messages taken from runs of record tables (see decoded_runs.ts). */
  private fromRuns = 0;
  /** Payload and topic bytes of the batch being merged (see mergeInto). */
  private batchBytes = 0;
  /** Seq of the last message delivered (0: none yet). */
  lastSeq = 0;
  private readonly batchBytesMax: number;
  private readonly pool: BufferPool | null;
  /** Message objects a borrowing reader hands out again in every batch. */
  private readonly borrowed: BorrowedMessage[] | null;
  /** Borrowed slots the last batch filled (releaseSlots). */
  private slotsUsed = 0;

  constructor(
    private readonly context: StoreContext,
    private readonly filter: Filter,
    private readonly from: ReadFrom,
    options: ReadOptions = {},
  ) {
    this.batchBytesMax = options.batchBytesMax ?? context.options.readBatchBytesMax;
    this.pool =
      options.borrow === true
        ? new BufferPool(2 * this.batchBytesMax + READ_CHUNK_BYTES_MAX)
        : null;
    this.borrowed = options.borrow === true ? [] : null;
  }

  /** Partitions this reader has opened cursors on. */
  get partitionCount(): number {
    return this.cursors.length;
  }

  /** The merge structure of the last batch ("binary_heap" or "calendar_queue"). */
  get merge(): string {
    return this.heap.name;
  }

  /** Span reads this reader started ahead of its lanes without waiting for them (see readSpans). */
  get readsAhead(): number {
    return this.spansReadAhead;
  }

  /** Messages this reader took from runs of span reads' record tables instead of through their cursors. */
  get runsTaken(): number {
    return this.fromRuns;
  }

  /** Batches that resumed the previous batch's merge instead of positioning every cursor again. */
  get batchesResumed(): number {
    return this.resumed;
  }

  /**
   * The next messages in seq order (up to the batch byte limit); empty when caught up. With
   * `borrow`, the previous batch's payloads are invalid from this call on.
   */
  async nextBatch(): Promise<StoredMessage[]> {
    const context = this.context;
    // The merge runs on the event loop's thread, and a consumer that awaits nothing but batches
    // resolves them through microtasks only: the completions of reads ahead then waited until a
    // batch waited for a read. A whole-stream read over 10,000 partitions had its next images'
    // reads stand still for the ~300 ms it merged the current ones. So while reads ahead are in
    // flight each batch first asks for a pause (the runtime's: a turn of the event loop once
    // half a millisecond passed since the last). Not otherwise: a batch that needs a read waits
    // for it anyway, so the pause stays where it was measured to help.
    if (context.prefetches.size > 0) {
      const pause = context.options.yieldToEvents();
      if (pause !== undefined) await pause;
    }
    if (context.closed) throw new StoreError("ARIA_ERR_STORE_CLOSED", "read from a closed store");
    this.pool?.release();
    context.readsInFlight++;
    try {
      const out = await this.batch(context);
      this.releaseSlots(out.length);
      return out;
    } finally {
      await context.readDone();
    }
  }

  /**
   * Borrowed slots past this batch's end let go of their buffers: a slot kept a view of an
   * earlier, longer batch's buffer, and so a mapping, whose file's disk space retention or a
   * split could not free while it lived.
   */
  private releaseSlots(used: number): void {
    const borrowed = this.borrowed;
    if (borrowed === null) return;
    for (let i = used; i < this.slotsUsed; i++) borrowed[i].release();
    this.slotsUsed = used;
  }

  /** Every message from the start point on, as far as is committed when each batch is read. */
  async *[Symbol.asyncIterator](): AsyncGenerator<StoredMessage> {
    for (;;) {
      const batch = await this.nextBatch();
      if (batch.length === 0) return;
      yield* batch;
    }
  }

  private async batch(context: StoreContext): Promise<StoredMessage[]> {
    const limit = context.committedSeq;
    const layout = context.layout.version;
    const known = this.cursors.length;
    this.discover(context);
    const count = this.cursors.length;
    // A calendar queue when the last batch's seqs were dense and the cursors many (a whole-
    // stream read of 10,000 partitions: O(1) per message, where the heap's sift was ~16% of the
    // read's CPU); a binary heap otherwise (sparse seqs would make the calendar scan empty slots).
    const calendar = this.denseKeys && count >= CALENDAR_CURSORS_MIN;
    // The last batch's merge resumes when nothing it stood on changed: the same limit, no layout
    // change in any partition since it positioned its cursors, no new cursor, the same merge
    // structure. Then only the cursors it took messages from have moved (every other one's head
    // and buffer are as they were), so only those are asked for reads, and the heap goes on as
    // it stands. Positioning all cursors and building the heap again took a whole-stream read of
    // 10,000 partitions 85–125 ms of its 0.45–0.8 s (131 batches).
    const resume =
      this.resumeLimit === limit &&
      this.resumeLayout === layout &&
      count === known &&
      this.heap instanceof CalendarQueue === calendar;
    this.resumeLimit = -1; // until this batch's merge has run to its end
    if (!resume && (this.keys.length < count || this.heap instanceof CalendarQueue !== calendar)) {
      if (this.keys.length < count) {
        this.keys = new Float64Array(count * 2);
        this.touched = new Int32Array(count * 2);
        this.touchedIn = new Int32Array(count * 2);
      }
      this.heap = calendar ? new CalendarQueue(this.keys.length) : new BinaryHeap(this.keys.length);
    }
    // Cursors that need no read are positioned at once; the others read concurrently, at most
    // READ_CONCURRENCY_MAX at a time (queue depth > 1, yet 10,000 partitions do not open 10,000
    // files at once past the open-file LRU), so a batch costs no async step per idle partition.
    // Cursors about to run dry top up in the same round: inside the merge a read is waited for
    // alone (queue depth 1), which over thousands of partitions would be most reads.
    const keys = this.keys;
    const reading: number[] = [];
    if (resume) {
      this.resumed++;
      for (let k = 0; k < this.touchedCount; k++) {
        const i = this.touched[k];
        if (keys[i] !== Infinity && this.cursors[i].lowOnData()) reading.push(-1 - i);
      }
    } else {
      // Runs not taken to their end are rewound: every cursor is positioned again below.
      const runs = this.runs;
      if (runs !== null) {
        for (let i = 0; i < runs.capacity; i++) {
          if (!runs.pending(i)) continue;
          this.cursors[i].rewind(runs.headSeq(i), runs.headPosition(i));
          runs.clear(i);
        }
      }
      if (count >= RUN_CURSORS_MIN && (runs === null || runs.capacity < count))
        this.runs = new DecodedRuns(this.keys.length);
      for (let i = 0; i < count; i++) {
        const cursor = this.cursors[i];
        const key = cursor.advance(context, limit);
        if (key === NEEDS_READ) reading.push(i);
        else {
          keys[i] = key;
          if (key !== Infinity && cursor.lowOnData()) reading.push(-1 - i);
        }
      }
    }
    if (reading.length > 1) await this.readSpans(context, reading);
    // Cursors that have just read their files read their next ones ahead at once (spans of reads
    // ahead only, not waited for), before the records just read are checked and merged: a
    // whole-stream read's first reads bring every partition's current image together, and the
    // next images are wanted together too.
    if (reading.length > 1 && reading.some((i) => i >= 0)) await this.readSpans(context, reading);
    await forEachConcurrently(reading.length, READ_CONCURRENCY_MAX, async (k) => {
      const i = reading[k];
      if (i < 0) await this.cursors[-1 - i].topUp(context);
      else keys[i] = await next(context, this.cursors[i], limit);
    });
    if (!resume) this.heap.init(keys, count);
    const batch = ++this.batches;
    this.touchedCount = 0;
    this.batchBytes = 0;
    const out: StoredMessage[] = [];
    // The merge runs in a plain function, not in this async one: locals that live across an
    // await become slots of the generator's frame, loaded and stored at every use in the loop.
    for (
      let waiting = this.mergeInto(context, limit, batch, out);
      waiting >= 0;
      waiting = this.mergeInto(context, limit, batch, out)
    ) {
      // The merge stopped at a cursor whose next record needs a read.
      const cursor = this.cursors[waiting];
      this.settle(cursor, waiting, await next(context, cursor, limit), limit);
    }
    this.resumeLimit = limit;
    this.resumeLayout = layout;
    if (out.length > 0) {
      this.lastSeq = out[out.length - 1].seq;
      this.denseKeys =
        out.length >= CALENDAR_CURSORS_MIN && 2 * out.length > this.lastSeq - out[0].seq + 1;
    }
    return out;
  }

  /**
   * Takes messages in seq order into `out` until the batch is full or nothing is left (-1), or
   * until a cursor's next record needs a read: then returns that cursor's index, its message
   * taken, for the caller to read and `settle`, and to call again.
   */
  private mergeInto(
    context: StoreContext,
    limit: number,
    batch: number,
    out: StoredMessage[],
  ): number {
    const heap = this.heap;
    const keys = this.keys;
    const runs = this.runs;
    const borrowed = this.borrowed;
    const bytesMax = this.batchBytesMax;
    let bytes = this.batchBytes;
    while (!heap.empty() && bytes < bytesMax && out.length < READ_BATCH_MESSAGES_MAX) {
      const source = heap.topSource();
      const cursor = this.cursors[source];
      let into: BorrowedMessage | null = null;
      if (borrowed !== null) {
        if (borrowed.length === out.length) borrowed.push(new BorrowedMessage());
        into = borrowed[out.length];
      }
      let message: StoredMessage;
      if (runs?.pending(source)) {
        // A record decoded ahead: the cursor's objects are not touched until its run ends.
        message = runs.take(source, into);
        bytes += runs.lastBytes;
        this.fromRuns++;
      } else {
        message = cursor.take(into);
        bytes += (message.length ?? message.payload.length) + message.topic.length;
      }
      out.push(message);
      if (runs?.pending(source)) {
        keys[source] = runs.headSeq(source);
        heap.advance(keys[source]);
        continue;
      }
      // The cursor moves: the next batch asks it whether it is low on data (see resume).
      if (this.touchedIn[source] !== batch) {
        this.touchedIn[source] = batch;
        this.touched[this.touchedCount++] = source;
      }
      const key = cursor.advance(context, limit);
      if (key === NEEDS_READ) {
        this.batchBytes = bytes;
        return source;
      }
      this.settle(cursor, source, key, limit);
    }
    this.batchBytes = bytes;
    return -1;
  }

  /** `key` is the next seq of cursor `source` (its message taken): its run is decoded (when it can be) and the merge goes on with it. */
  private settle(cursor: PartitionCursor, source: number, key: number, limit: number): void {
    // The new head and the records after it, while the cursor's objects are in cache.
    if (this.runs !== null && key !== Infinity) cursor.decodeRun(this.runs, source, limit);
    this.keys[source] = key;
    this.heap.advance(key);
  }

  /**
   * Lanes about to read regions of one pack that lie back to back (a sorter batch writes the
   * segments of many partitions side by side, and a read of many partitions wants them all at
   * once) are served by one read of the whole run: each lane takes a view of its region. Over
   * 10,000 partitions this replaces thousands of small reads, and the buffers for them, by a few
   * large ones. A lane takes at most SPAN_SHARE_CHUNKS of its chunks this way (what its buffer
   * and its read-ahead chunk would hold otherwise). A span read into memory (a disk that does
   * not map files) lives while any lane still reads its view: a whole-stream read over 10,000
   * partitions held 300–570 MB of them (two segments' worth per lane), where 16 KiB chunks and
   * read-ahead chunks held up to ~320 MB. A mapped span holds page-cache pages, no memory of
   * its own.
   */
  private async readSpans(context: StoreContext, reading: readonly number[]): Promise<void> {
    const requests: SpanRequest[] = [];
    for (const k of reading) this.cursors[k < 0 ? -1 - k : k].spanWants(requests);
    if (requests.length < 2) return;
    requests.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : a.position - b.position));
    const spans: SpanRequest[][] = [];
    for (let i = 0; i < requests.length; ) {
      let j = i + 1;
      while (
        j < requests.length &&
        requests[j].path === requests[i].path &&
        requests[j].fromStart &&
        requests[j].imageStart === requests[j - 1].next &&
        requests[j].end - requests[i].position <= SPAN_BYTES_MAX
      ) {
        j++;
      }
      if (j - i > 1) spans.push(requests.slice(i, j));
      i = j;
    }
    // Spans only read ahead for are not waited for: the merge goes on while they are read, and a
    // lane that reaches its next file before its span lands waits for it then (Lane.aheadRead).
    // Waiting for them here left the merge idle for a third of a warm 10,000-partition read.
    // While file removals wait for the reads in flight to end, no new read ahead starts: reads
    // ahead outlive batches, and a long read that kept one in flight at all times would hold
    // removals (drained journals, retention) off for as long as it ran. Its lanes read ahead
    // later, when low on data.
    const tabulate = this.cursors.length >= RUN_CURSORS_MIN;
    const needed: SpanRequest[][] = [];
    for (const span of spans) {
      if (span.some((request) => !request.ahead)) needed.push(span);
      else if (context.deferred.length === 0) {
        prefetch(context, span, tabulate);
        this.spansReadAhead++;
      }
    }
    await forEachConcurrently(needed.length, READ_CONCURRENCY_MAX, (k) =>
      readSpan(context, needed[k], tabulate),
    );
  }

  private discover(context: StoreContext): void {
    const list = context.partitionList;
    if (this.partitionsSeen === list.length) return;
    const fresh: PartitionLog[] = [];
    for (let i = this.partitionsSeen; i < list.length; i++)
      if (this.filter.touchesPartition(list[i].name)) fresh.push(list[i]);
    this.partitionsSeen = list.length;
    if (fresh.length === 0) return;
    const chunkBytes = Math.min(
      READ_CHUNK_BYTES_MAX,
      Math.floor(context.options.readBufferBytes / (this.cursors.length + fresh.length)),
    );
    const from: ReadFrom = this.lastSeq > 0 ? { afterSeq: this.lastSeq } : this.from;
    for (const log of fresh)
      this.cursors.push(
        new PartitionCursor(
          log,
          this.filter,
          from,
          chunkBytes,
          this.storeMatches,
          this.pool,
          this.access,
        ),
      );
    this.access.sparse = this.cursors.length <= list.length * SPARSE_PARTITIONS_SHARE;
  }
}

/**
 * Reads `span` (requests back to back in one pack) at once; each lane takes a view of its region.
 * Where the disk maps files (`DiskFile.map`; packs are never written again) the views are of
 * the mapped region, its pages in the page cache: no buffer, no copy. Read into fresh memory,
 * a 10,000-partition whole-stream read faulted in every 4 KiB page of ~570 MB of span buffers
 * (~0.3 s of system time, on the two cores the merge runs on). A whole image's records are
 * checked here, against its records CRC, as soon as they land: the reader is often still
 * waiting for other spans then (the first reads of a whole-stream read), where checking them at
 * each lane's first record held back the merge's start (~70 ms per 270 MB on this machine).
 */
async function readSpan(
  context: StoreContext,
  span: readonly SpanRequest[],
  tabulate: boolean,
): Promise<void> {
  const start = span[0].position;
  const end = span[span.length - 1].end;
  let bytes = await context.files.with(span[0].path, (file) =>
    file.map === undefined ? null : file.map(start, end - start),
  );
  if (bytes === null) {
    bytes = new Uint8Array(end - start);
    await readChunk(context, span[0].path, start, bytes, end);
  } else {
    context.bytesRead += bytes.length;
  }
  // Whole images that match their records CRC are tabulated for runs, the records walked in file
  // order as they land (see decoded_runs.ts); `tabulate`: for a merge of many cursors (runs).
  const table = tabulate ? new RecordTable(bytes, start, Math.ceil((end - start) / 1024)) : null;
  for (const request of span) {
    const from = request.position - start;
    const to = request.end - start;
    const region = bytes.subarray(from, to);
    const checked = request.recordsCrc !== -1 && context.crc32(region) === request.recordsCrc;
    let tabled: TabledImage | null = null;
    if (checked && table !== null) {
      const first = table.tabulate(from, to);
      if (first >= 0) tabled = { table, shift: from, first, end: table.count };
    }
    request.lane.acceptSpan(request.path, request.position, region, request.ahead, checked, tabled);
  }
}

/**
 * Starts reading `span`, whose requests are all reads ahead, without waiting: each lane's
 * `aheadRead` until it lands. It counts as a read in flight (files stay until it ends) and the
 * store's close waits for it. A failure only leaves the lanes without their read ahead: each then
 * reads its next file itself, where an error is reported.
 */
function prefetch(context: StoreContext, span: readonly SpanRequest[], tabulate: boolean): void {
  context.readsInFlight++;
  const done = readSpan(context, span, tabulate)
    .catch(() => {})
    .then(() => {
      for (const request of span)
        if (request.lane.aheadRead === done) request.lane.aheadRead = null;
      context.prefetches.delete(done);
      // A removal that fails here leaves an orphan file the next open removes.
      return context.readDone().catch(() => {});
    });
  context.prefetches.add(done);
  for (const request of span) request.lane.aheadRead = done;
}

async function next(
  context: StoreContext,
  cursor: PartitionCursor,
  limit: number,
): Promise<number> {
  for (;;) {
    const key = cursor.advance(context, limit);
    if (key !== NEEDS_READ) return key;
    await cursor.load(context);
  }
}
