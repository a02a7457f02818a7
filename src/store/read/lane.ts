/**
 * lane: one seq-ordered run of files a partition read merges — a subtree store, or the
 * partition's segments followed by its records still in the journal — walked record by record.
 * The top layer of a lane (lane_buffer → lane_read_ahead → lane), and the reader's hot path.
 *
 *   files:  [seg 12][seg 40] ─▶ journal records (pending) ─▶ Infinity (nothing more for now)
 *            ^ segmentIndex, position    ^ pendingIndex
 *   head:   the next record to yield (headAt in the buffer, headSeq), its topic matched
 *
 * `advance` moves to the next record to yield, or returns NEEDS_READ with `want` set: it does no
 * I/O, so the merge runs without awaits until a read is due. Does not hold or fetch bytes
 * (lane_buffer.ts) nor plan reads ahead (lane_read_ahead.ts). Invariants: yielded seqs strictly
 * increase, each >= the lane's resume seq and <= the batch's limit; every record is checked
 * (its CRC, or its image's) before it is yielded.
 */
import { assert } from "../../stdx/assert.ts";
import type { StoreContext } from "../context.ts";
import { asSeq, type BorrowedMessage, type DecodedRuns } from "../decoded_runs.ts";
import type { PartitionLog } from "../partition_log.ts";
import {
  checkRecord,
  RECORD_INCOMPLETE,
  RECORD_PAYLOAD_BYTES_OFFSET,
  RECORD_TOPIC_BYTES_OFFSET,
  RECORD_TOPIC_OFFSET,
  recordBytes,
  recordPayload,
  recordProperties,
  recordPropertiesBytes,
  recordProblem,
  recordSeq,
  recordTime,
  type StoredMessage,
} from "../record.ts";
import { seekIndex } from "../segment_index.ts";
import { dataBaseOf, indexSpanOf, recordSpanOf } from "../subtree_store_file.ts";
import type { BufferPool } from "./buffer_pool.ts";
import { corrupt } from "./file_access.ts";
import { type FileMeta, recordsCrcOf, smallInPack } from "./file_meta.ts";
import { type LaneOwner, NEEDS_READ, WANT_AHEAD } from "./lane_buffer.ts";
import { LaneReadAhead } from "./lane_read_ahead.ts";
import type { TopicCache } from "./topic_cache.ts";

const NO_BYTES = new Uint8Array(0);

/** One partition's source of records: a run of files (and journal records) in seq order. */
export class Lane extends LaneReadAhead {
  /** The topic of the last record considered: its name, its bytes and whether it matches. */
  topic = "";
  topicUtf8: Uint8Array = NO_BYTES;
  topicMatches = false;
  /** The head's publish time (read once, in consider). */
  private headTime = 0;

  constructor(
    readonly log: PartitionLog,
    files: readonly FileMeta[],
    withPending: boolean,
    private readonly topics: TopicCache,
    private readonly matchesAll: boolean,
    from: { nextSeq: number; timeFloor: number },
    chunkBytes: number,
    owner: LaneOwner,
    pool: BufferPool | null,
  ) {
    super(files, withPending, chunkBytes, owner, pool);
    this.nextSeq = from.nextSeq;
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
          const index = context.reads.indexes.get(file.id);
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
      // (or a subtree store a split switched in) while this batch awaited a read may hold later
      // seqs, and yielding them would pass over other partitions' records at or below them, still
      // pending.
      const seq = recordSeq(this.view, at);
      if (seq > limit) return Infinity;
      const length = this.view.getUint32(at, true);
      this.position += length;
      if (this.consider(at, length, seq)) return this.headSeq;
    }
    if (!this.withPending) return Infinity;
    if (this.pendingIndex < 0) this.pendingIndex = log.pendingAfter(this.nextSeq - 1);
    const journals = context.journal;
    while (this.pendingIndex < log.pendingTail) {
      const i = this.pendingIndex;
      const seq = log.pendingSeq(i);
      if (seq > limit) return Infinity;
      if (log.pendingTime(i) < this.owner.timeFloor) {
        this.pendingIndex++;
        continue;
      }
      const journal = journals.generation(log.pendingGen(i));
      const at = this.recordAt(context, journal.path, log.pendingPosition(i), journal.bytes);
      if (at === NEEDS_READ) return NEEDS_READ;
      this.pendingIndex++;
      if (this.consider(at, log.pendingLength(i), recordSeq(this.view, at))) return this.headSeq;
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
        timeUs: this.headTime,
        topic: this.topic,
        payload: recordPayload(this.buffer, this.view, at),
      };
      const properties = recordProperties(this.buffer, this.view, at);
      if (properties !== undefined) message.properties = properties;
    } else {
      into.seq = this.headSeq;
      into.timeUs = this.headTime;
      into.topic = this.topic;
      into.topicUtf8 = this.topicUtf8;
      into.source = this.buffer;
      into.start =
        at + RECORD_TOPIC_OFFSET + this.view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true);
      into.length = this.view.getUint32(at + RECORD_PAYLOAD_BYTES_OFFSET, true);
      into.propertiesBytes = recordPropertiesBytes(this.view, at);
      into.propertiesStart = into.start + into.length;
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
    runs.begin(source, table, head, last, this.topic, this.topicUtf8);
    this.nextSeq = asSeq(table.seqs[last - 1] + 1);
    this.headAt = (table.offsets[last] - tabled.shift) | 0;
    this.headLength = recordBytes(
      this.topicUtf8.length,
      table.payloadBytes[last],
      table.propertiesBytes[last],
    );
    this.headSeq = asSeq(table.seqs[last]);
    this.headTime = recordTime(this.view, this.headAt);
    this.position = this.bufferStart + this.headAt + this.headLength;
    if (this.pool !== null) this.lent = true;
    return true;
  }

  /**
   * Sets the lane back to the record of `seq` at `position` of its current file (a run not taken to
   * its end).
   */
  rewind(seq: number, position: number): void {
    this.position = position;
    this.nextSeq = seq;
    this.headAt = -1;
    this.headSeq = Infinity;
  }

  /**
   * Decides whether the checked record at `at` (of seq `seq`: the caller read it) is yielded; sets
   * the head when it is. Each record's seq and time are read once (they were read twice each:
   * with the limit's check, here and in take).
   */
  private consider(at: number, length: number, seq: number): boolean {
    if (seq < this.nextSeq) return false;
    const timeUs = recordTime(this.view, at);
    if (timeUs < this.owner.timeFloor) return false;
    if (!this.sameTopic(at)) this.switchTopic(at);
    if (!this.topicMatches) return false;
    this.headAt = at;
    this.headLength = length;
    this.headSeq = seq;
    this.headTime = timeUs;
    return true;
  }

  /** True when the record at `at` has the topic of the last record considered. */
  private sameTopic(at: number): boolean {
    const known = this.topicUtf8;
    const length = known.length;
    if (this.view.getUint16(at + RECORD_TOPIC_BYTES_OFFSET, true) !== length) return false;
    const buffer = this.buffer;
    const from = at + RECORD_TOPIC_OFFSET;
    for (let i = 0; i < length; i++) if (buffer[from + i] !== known[i]) return false;
    return true;
  }

  /**
   * Sets the topic to that of the record at `at`, from the reader's topic cache (a partition's
   * topics interleave: no string is built per record).
   */
  private switchTopic(at: number): void {
    const topics = this.topics;
    const entry = topics.find(this.buffer, this.view, at);
    this.topic = topics.names[entry];
    this.topicUtf8 = topics.bytes[entry];
    this.topicMatches = this.matchesAll || topics.matches(entry);
  }

  /** Offset in `buffer` of the checked record at `position` of `path`, or NEEDS_READ. */
  private recordAt(context: StoreContext, path: string, position: number, end: number): number {
    if (this.bufferPath === path && position >= this.bufferStart) {
      const offset = position - this.bufferStart;
      if (offset < this.bufferLength) {
        // `| 0`: the offset reaches the DataView as an int32. File positions (which may pass
        // 2^31) are doubles in optimized code once any of them was, and a DataView read at a
        // double offset left JavaScriptCore's optimized code on every call ("Uncountable" OSR
        // exits, never recompiled): from the second read in a process on, a whole-stream read
        // ran at about half its speed (docs/benchmarks.md#storage-issue-3).
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
   * them all (the one the manifest keeps) instead of one per record, which took a large share
   * of a many-partition whole-stream read (docs/benchmarks.md#storage-issue-3). On a mismatch
   * the records are checked one by one, and the first damaged one is reported with its offset.
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
}
