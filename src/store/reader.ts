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
 * Invariants: a cursor yields strictly increasing seqs, each >= its resume seq; the heap holds
 * one key per cursor (Infinity: nothing more for now); no file is removed while a batch runs.
 */
import { READ_CHUNK_BYTES_MAX, READ_CHUNK_BYTES_MIN, STORE_INDEXES_CACHED_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { BinaryHeap } from "../tip/heap/mod.ts";
import { type Filter, isUnder } from "../topic/mod.ts";
import type { StoreContext } from "./context.ts";
import { FILE_HEADER_FIXED_BYTES } from "./file_header.ts";
import { StoreError, indexPath, segmentPath } from "./layout.ts";
import type { PartitionLog } from "./partition_log.ts";
import {
  RECORD_INCOMPLETE,
  type StoredMessage,
  checkRecord,
  recordPayload,
  recordProblem,
  recordSeq,
  recordTime,
  recordTopic,
  recordTopicEquals,
} from "./record.ts";
import { readFully } from "./sorter.ts";
import { type SegmentIndex, decodeSegmentIndex, seekIndex } from "./segment_index.ts";

/** Where a read starts: at a seq, after a seq (resume), or at the first message at or after a time. */
export type ReadFrom = { seq: number } | { afterSeq: number } | { timeUs: number };

/** Options of a read. */
export type ReadOptions = { batchBytesMax?: number };

const NEEDS_READ = -1;

class Cursor {
  version = -1;
  /** Next seq this cursor may yield. */
  nextSeq: number;
  /** Until the first yield of a time-based read: skip records older than this. */
  timeFloor: number;
  segmentIndex = 0;
  position = -1;
  pendingIndex = -1;
  buffer: Uint8Array;
  view: DataView;
  bufferPath = "";
  bufferStart = 0;
  bufferLength = 0;
  want = { path: "", position: 0, bytes: 0, limit: 0 };
  headAt = -1;
  headLength = 0;
  headSeq = Infinity;
  topicCache = "";
  topicMatches = false;
  readonly matchesAll: boolean;

  constructor(
    readonly log: PartitionLog,
    private readonly filter: Filter,
    from: ReadFrom,
    private readonly chunkBytes: number,
  ) {
    this.nextSeq = "seq" in from ? from.seq : "afterSeq" in from ? from.afterSeq + 1 : 1;
    this.timeFloor = "timeUs" in from ? from.timeUs : -Infinity;
    this.matchesAll = filter.entries.some((entry) => entry.kind === "subtree" && isUnder(log.name, entry.prefix));
    this.buffer = new Uint8Array(0);
    this.view = new DataView(this.buffer.buffer);
  }

  reset(): void {
    this.version = this.log.version;
    const segments = this.log.segments;
    let lo = 0;
    let hi = segments.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (segments[mid].lastSeq < this.nextSeq || segments[mid].lastTimeUs < this.timeFloor) lo = mid + 1;
      else hi = mid;
    }
    this.segmentIndex = lo;
    this.position = -1;
    this.pendingIndex = -1;
    this.headSeq = Infinity;
    this.headAt = -1;
  }

  /**
   * Moves to the next record to yield (seq <= limit): its seq, Infinity when there is none yet,
   * or NEEDS_READ with `want` set (the caller reads, then calls again). No I/O here.
   */
  advance(context: StoreContext, limit: number): number {
    if (this.headAt >= 0) return this.headSeq;
    const log = this.log;
    // The partition changed while this batch awaited a read: look the position up again.
    if (this.version !== log.version) this.reset();
    while (this.segmentIndex < log.segments.length) {
      const segment = log.segments[this.segmentIndex];
      if (this.position < 0) {
        const index = context.indexes.get(segment.id);
        if (index === undefined) return this.request(indexPath(segment.id), 0, 0, -1);
        const target = this.timeFloor > -Infinity ? { timeUs: this.timeFloor } : { seq: this.nextSeq };
        this.position = index === null ? FILE_HEADER_FIXED_BYTES + log.name.length : seekIndex(index, target);
      }
      if (this.position >= segment.bytes) {
        this.segmentIndex++;
        this.position = -1;
        continue;
      }
      const at = this.recordAt(context, segmentPath(segment.id), this.position, segment.bytes);
      if (at === NEEDS_READ) return NEEDS_READ;
      const length = this.view.getUint32(at, true);
      this.position += length;
      if (this.consider(at, length)) return this.headSeq;
    }
    if (this.pendingIndex < 0) this.pendingIndex = log.pendingAfter(this.nextSeq - 1);
    while (this.pendingIndex < log.pendingTail) {
      const i = this.pendingIndex;
      const seq = log.pendingSeqs[i];
      if (seq > limit) return Infinity;
      if (log.pendingTimes[i] < this.timeFloor) {
        this.pendingIndex++;
        continue;
      }
      const journal = context.journal(log.pendingGens[i]);
      const at = this.recordAt(context, journal.path, log.pendingPositions[i], journal.bytes);
      if (at === NEEDS_READ) return NEEDS_READ;
      this.pendingIndex++;
      if (this.consider(at, log.pendingLengths[i])) return this.headSeq;
    }
    return Infinity;
  }

  /** The current head as a message; the cursor moves past it. */
  take(): StoredMessage {
    assert(this.headAt >= 0, "reader: take without a head");
    const at = this.headAt;
    const message = {
      seq: this.headSeq,
      timeUs: recordTime(this.view, at),
      topic: this.topicCache,
      payload: recordPayload(this.buffer, this.view, at),
    };
    this.nextSeq = this.headSeq + 1;
    this.timeFloor = -Infinity;
    this.headAt = -1;
    this.headSeq = Infinity;
    return message;
  }

  /** Decides whether the checked record at `at` is yielded; sets the head when it is. */
  private consider(at: number, length: number): boolean {
    const seq = recordSeq(this.view, at);
    if (seq < this.nextSeq || recordTime(this.view, at) < this.timeFloor) return false;
    if (!recordTopicEquals(this.buffer, this.view, at, this.topicCache)) {
      this.topicCache = recordTopic(this.buffer, this.view, at);
      this.topicMatches = this.matchesAll || this.filter.matches(this.topicCache);
    }
    if (!this.topicMatches) return false;
    this.headAt = at;
    this.headLength = length;
    this.headSeq = seq;
    return true;
  }

  /** Offset in `buffer` of the checked record at `position` of `path`, or NEEDS_READ. */
  private recordAt(context: StoreContext, path: string, position: number, end: number): number {
    if (this.bufferPath === path && position >= this.bufferStart) {
      const at = position - this.bufferStart;
      const length = checkRecord(this.buffer, this.view, at, this.bufferLength, context.crc32);
      if (length > 0) return at;
      if (length !== RECORD_INCOMPLETE) throw corrupt(path, position, recordProblem(length));
      if (this.bufferStart + this.bufferLength >= end) throw corrupt(path, position, "record cut short");
    }
    let bytes = Math.max(this.chunkBytes, READ_CHUNK_BYTES_MIN);
    if (this.bufferPath === path && position >= this.bufferStart && position - this.bufferStart + 4 <= this.bufferLength) {
      const length = this.view.getUint32(position - this.bufferStart, true);
      bytes = Math.max(bytes, length);
    }
    return this.request(path, position, Math.min(bytes, end - position), end);
  }

  private request(path: string, position: number, bytes: number, limit: number): number {
    this.want.path = path;
    this.want.position = position;
    this.want.bytes = bytes;
    this.want.limit = limit;
    return NEEDS_READ;
  }

  /** Performs `want`: a chunk of a data file, or a segment index. */
  async load(context: StoreContext): Promise<void> {
    const want = this.want;
    if (want.limit < 0) {
      await loadIndex(context, want.path);
      return;
    }
    if (this.buffer.length < want.bytes) {
      this.buffer = new Uint8Array(Math.max(want.bytes, Math.min(this.chunkBytes, READ_CHUNK_BYTES_MAX)));
      this.view = new DataView(this.buffer.buffer);
    }
    const into = this.buffer.subarray(0, want.bytes);
    const read = await context.files.with(want.path, (file) => readFully(file, want.position, into));
    if (read < want.bytes) throw corrupt(want.path, want.position + read, `file ends early (expected ${want.limit} bytes)`);
    this.bufferPath = want.path;
    this.bufferStart = want.position;
    this.bufferLength = read;
  }
}

function corrupt(path: string, offset: number, what: string): StoreError {
  return new StoreError("ARIA_ERR_STORE_CORRUPT", `Cannot read "${path}": ${what} at offset ${offset}`);
}

async function loadIndex(context: StoreContext, path: string): Promise<void> {
  const id = Number.parseInt(path.slice(path.lastIndexOf("/") + 1), 16);
  let index: SegmentIndex | null = null;
  try {
    const bytes = await context.files.with(path, async (file) => {
      const into = new Uint8Array(await file.size());
      await readFully(file, 0, into);
      return into;
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
  private readonly cursors: Cursor[] = [];
  private partitionsSeen = 0;
  private heap = new BinaryHeap(16);
  private keys = new Float64Array(16);
  /** Seq of the last message delivered (0: none yet). */
  lastSeq = 0;
  private readonly batchBytesMax: number;

  constructor(
    private readonly context: StoreContext,
    private readonly filter: Filter,
    private readonly from: ReadFrom,
    options: ReadOptions = {},
  ) {
    this.batchBytesMax = options.batchBytesMax ?? context.options.readBatchBytesMax;
  }

  /** Partitions this reader has opened cursors on. */
  get partitionCount(): number {
    return this.cursors.length;
  }

  /** The next messages in seq order (up to the batch byte limit); empty when caught up. */
  async nextBatch(): Promise<StoredMessage[]> {
    const context = this.context;
    if (context.closed) throw new StoreError("ARIA_ERR_STORE_CLOSED", "read from a closed store");
    context.readsInFlight++;
    try {
      return await this.batch(context);
    } finally {
      await context.readDone();
    }
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
    this.discover(context);
    const count = this.cursors.length;
    if (this.keys.length < count) {
      this.keys = new Float64Array(count * 2);
      this.heap = new BinaryHeap(count * 2);
    }
    // Cursors that need no read are positioned at once; the others read concurrently (queue
    // depth > 1), so a batch costs no async step per idle partition.
    const keys = this.keys;
    const waiting: Promise<void>[] = [];
    for (let i = 0; i < count; i++) {
      const cursor = this.cursors[i];
      if (cursor.version !== cursor.log.version) cursor.reset();
      const key = cursor.advance(context, limit);
      if (key !== NEEDS_READ) keys[i] = key;
      else waiting.push(next(context, cursor, limit).then((k) => void (keys[i] = k)));
    }
    if (waiting.length > 0) await Promise.all(waiting);
    const heap = this.heap;
    heap.init(this.keys, count);
    const out: StoredMessage[] = [];
    let bytes = 0;
    while (!heap.empty() && bytes < this.batchBytesMax) {
      const cursor = this.cursors[heap.topSource()];
      const message = cursor.take();
      out.push(message);
      bytes += message.payload.length + message.topic.length;
      let key = cursor.advance(context, limit);
      if (key === NEEDS_READ) key = await next(context, cursor, limit);
      heap.advance(key);
    }
    if (out.length > 0) this.lastSeq = out[out.length - 1].seq;
    return out;
  }

  private discover(context: StoreContext): void {
    const list = context.partitionList;
    if (this.partitionsSeen === list.length) return;
    const fresh: PartitionLog[] = [];
    for (let i = this.partitionsSeen; i < list.length; i++) if (this.filter.touchesPartition(list[i].name)) fresh.push(list[i]);
    this.partitionsSeen = list.length;
    if (fresh.length === 0) return;
    const chunkBytes = Math.min(READ_CHUNK_BYTES_MAX, Math.floor(context.options.readBufferBytes / (this.cursors.length + fresh.length)));
    const from: ReadFrom = this.lastSeq > 0 ? { afterSeq: this.lastSeq } : this.from;
    for (const log of fresh) this.cursors.push(new Cursor(log, this.filter, from, chunkBytes));
  }
}

async function next(context: StoreContext, cursor: Cursor, limit: number): Promise<number> {
  for (;;) {
    const key = cursor.advance(context, limit);
    if (key !== NEEDS_READ) return key;
    await cursor.load(context);
  }
}
