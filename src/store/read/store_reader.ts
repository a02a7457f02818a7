/**
 * StoreReader: reads a filter's messages from disk in seq order, from a seq or a time, by an
 * n-way merge over the partitions the filter touches (only those are ever opened). Each
 * partition is one partition read (partition_read.ts): its closed segments (sought through their
 * sparse index), then its records still in the journal. A merge heap (src/merge) on the
 * partition reads' next seqs picks the next message.
 *
 *   partition read(app/a) : [seg 12][seg 40] journal… ─┐
 *   partition read(app/b) : [seg 13] journal…         ─┼─ heap on next seq ─▶ batch of messages
 *   partition read(ops/x) : journal…                  ─┘
 *
 * The layers below, one file each: store_reader (merge, batches) → partition_read → lane
 * (record walk) → lane_read_ahead → lane_buffer → file_access / index_cache / buffer_pool, with
 * span_read (one read for many lanes' regions of a pack) beside them.
 *
 * Reads stop at the store's committed seq; an empty batch means "caught up, ask again later".
 * A reader is resumable: it continues after `lastSeq`, and `store.read(filter, {afterSeq})`
 * starts a new one at the same place. Between batches a partition read keeps only positions;
 * when its partition changed (a segment closed or retired), it seeks again from its next seq.
 *
 * Invariants: a partition read yields strictly increasing seqs, each >= its resume seq; the heap
 * holds one key per partition read (Infinity: nothing more for now); no file is removed while a
 * batch runs.
 */
import {
  CALENDAR_PARTITIONS_MIN,
  READ_BATCH_MESSAGES_MAX,
  READ_CHUNK_BYTES_MAX,
  READ_CHUNK_BYTES_MIN,
  READ_CONCURRENCY_MAX,
  RUN_PARTITIONS_MIN,
  SPARSE_PARTITIONS_SHARE,
} from "../../constants.ts";
import { BinaryHeap, CalendarQueue, type MergeHeap } from "../../merge/mod.ts";
import { forEachConcurrently } from "../../stdx/concurrently.ts";
import type { Filter } from "../../topic/mod.ts";
import type { StoreContext } from "../context.ts";
import { BorrowedMessage, DecodedRuns } from "../decoded_runs.ts";
import { StoreError } from "../layout.ts";
import type { PartitionLog } from "../partition_log.ts";
import type { StoredMessage } from "../record.ts";
import { BufferPool } from "./buffer_pool.ts";
import { NEEDS_READ } from "./lane_buffer.ts";
import { advanceReading, PartitionRead, type ReadFrom } from "./partition_read.ts";
import { readSpans, type SpanRequest } from "./span_read.ts";
import { TopicCache } from "./topic_cache.ts";

export type { ReadFrom } from "./partition_read.ts";

/**
 * Options of a read. `borrow`: a batch's payloads are views into the reader's buffers, valid
 * only until the next `nextBatch()` call (no copy per message; the broker encodes each batch
 * into frames at once). Without it every payload is a copy the caller may keep. `bufferBytes`:
 * the read-ahead its partition reads share (default the store's readBufferBytes), so a reader
 * that hands out a little at a time (a subscriber's catch-up) holds little.
 */
export type ReadOptions = {
  batchBytesMax?: number;
  borrow?: boolean;
  bufferBytes?: number;
  /** Bytes of the first batch (default batchBytesMax): a subscriber's first message sooner. */
  firstBatchBytesMax?: number;
};

/** A pull reader of one filter's messages in seq order. */
export class StoreReader {
  private readonly parts: PartitionRead[] = [];
  /** The topics its partition reads meet, by their stored bytes (see topic_cache.ts). */
  private readonly topics: TopicCache;
  /** Per subtree store id: whether it holds none, some or only matching topics. */
  private readonly subtreeMatches = new Map<number, number>();
  /**
   * Whether this reader reads few of the store's partitions (a 1% subtree): then the small
   * packed images it reads are read without the kernel's read-ahead, which would read the
   * neighbouring partitions' images it never wants. A dense reader wants them soon: kept.
   */
  private readonly access = { sparse: false, firstReadBytes: 0 };
  private partitionsSeen = 0;
  private heap: MergeHeap = new BinaryHeap(16);
  /**
   * Records decoded ahead per partition read, once they are many (see decoded_runs.ts); null
   * before.
   */
  private runs: DecodedRuns | null = null;
  private keys = new Float64Array(16);
  /**
   * The last batch's seqs were dense (most seqs in its range were this reader's): merge with a
   * calendar queue.
   */
  private denseKeys = false;
  /**
   * What the merge of the last batch left, for the next one to resume from: the limit and the
   * store's layout version it ran under (-1: nothing to resume), and the partition reads it took
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
  private readonly firstBatchBytesMax: number;
  /** Read-ahead bytes this reader's partition reads share (see ReadOptions). */
  private readonly bufferBytes: number;
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
    this.topics = new TopicCache(filter);
    this.batchBytesMax = options.batchBytesMax ?? context.options.readBatchBytesMax;
    this.bufferBytes = options.bufferBytes ?? context.options.readBufferBytes;
    this.firstBatchBytesMax = Math.min(
      this.batchBytesMax,
      options.firstBatchBytesMax ?? this.batchBytesMax,
    );
    // A small first batch wants small first reads too: the lanes of the first batch read
    // READ_CHUNK_BYTES_MIN first, then their chunks.
    if (this.firstBatchBytesMax < this.batchBytesMax)
      this.access.firstReadBytes = READ_CHUNK_BYTES_MIN;
    // The pool keeps two batches' buffers and a round of its lanes' chunks (its read-ahead):
    // kept any smaller, a reader of many partitions allocated most of its reads afresh (a catch-up
    // reader of 16 partitions, 256 KiB batches: 85 MB over 32 batches, 8 MB keeping its read-ahead).
    this.pool =
      options.borrow === true
        ? new BufferPool(2 * this.batchBytesMax + Math.max(READ_CHUNK_BYTES_MAX, this.bufferBytes))
        : null;
    this.borrowed = options.borrow === true ? [] : null;
  }

  /** Partitions this reader has opened a partition read on. */
  get partitionCount(): number {
    return this.parts.length;
  }

  /** The merge structure of the last batch ("binary_heap" or "calendar_queue"). */
  get merge(): string {
    return this.heap.name;
  }

  /** Span reads this reader started ahead of its lanes without waiting for them (see readSpans). */
  get readsAhead(): number {
    return this.spansReadAhead;
  }

  /**
   * Messages this reader took from runs of span reads' record tables instead of through their
   * partition reads.
   */
  get runsTaken(): number {
    return this.fromRuns;
  }

  /** Bytes of read buffers a borrowing reader allocated (its pool had none free to reuse). */
  get bufferBytesAllocated(): number {
    return this.pool?.allocatedBytes ?? 0;
  }

  /** Batches that resumed the last batch's merge instead of positioning every partition read. */
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
    // batch waited for a read; a many-partition whole-stream read had its next images' reads
    // stand still while it merged the current ones (docs/benchmarks.md#storage-issue-3). So
    // while reads ahead are in flight each batch first asks for a pause (the runtime's: a turn
    // of the event loop once half a millisecond passed since the last). Not otherwise: a batch
    // that needs a read waits for it anyway, so the pause stays where it was measured to help.
    if (context.reads.prefetches.size > 0) {
      const pause = context.options.yieldToEvents();
      if (pause !== undefined) await pause;
    }
    if (context.closed) throw new StoreError("ARIA_ERR_STORE_CLOSED", "read from a closed store");
    this.pool?.release();
    context.reads.inFlight++;
    try {
      const out = await this.batch(context);
      this.releaseSlots(out.length);
      return out;
    } finally {
      await context.reads.done();
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
    const limit = context.journal.committedSeq;
    const layout = context.partitions.layout.version;
    const known = this.parts.length;
    this.discover(context);
    const count = this.parts.length;
    // A calendar queue when the last batch's seqs were dense and the partition reads many (a whole-
    // stream read of many partitions: O(1) per message, where the heap's sift was a visible
    // share of the read's CPU, docs/benchmarks.md#storage-issue-3); a binary heap otherwise
    // (sparse seqs would make the calendar scan empty slots).
    const calendar = this.denseKeys && count >= CALENDAR_PARTITIONS_MIN;
    // The last batch's merge resumes when nothing it stood on changed: the same limit, no layout
    // change in any partition since it positioned its partition reads, no new partition read, the
    // same merge structure. Then only the partition reads it took messages from have moved (every
    // other one's head and buffer are as they were), so only those are asked for reads, and the
    // heap goes on as it stands. Positioning all partition reads and building the heap again in
    // every batch cost a many-partition whole-stream read a large share of its time
    // (docs/benchmarks.md#storage-issue-3).
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
    // Partition reads that need no disk read are positioned at once; the others read
    // concurrently, at most READ_CONCURRENCY_MAX at a time (queue depth > 1, yet 10,000
    // partitions do not open 10,000 files at once past the open-file LRU), so a batch costs no
    // async step per idle partition. Partition reads about to run dry top up in the same round:
    // inside the merge a read is waited for alone (queue depth 1), which over thousands of
    // partitions would be most reads.
    const keys = this.keys;
    const reading: number[] = [];
    if (resume) {
      this.resumed++;
      for (let k = 0; k < this.touchedCount; k++) {
        const i = this.touched[k];
        if (keys[i] !== Infinity && this.parts[i].lowOnData()) reading.push(-1 - i);
      }
    } else {
      // Runs not taken to their end are rewound: every partition read is positioned again below.
      const runs = this.runs;
      if (runs !== null) {
        for (let i = 0; i < runs.capacity; i++) {
          if (!runs.pending(i)) continue;
          this.parts[i].rewind(runs.headSeq(i), runs.headPosition(i));
          runs.clear(i);
        }
      }
      if (count >= RUN_PARTITIONS_MIN && (runs === null || runs.capacity < count))
        this.runs = new DecodedRuns(this.keys.length);
      for (let i = 0; i < count; i++) {
        const part = this.parts[i];
        const key = part.advance(context, limit);
        if (key === NEEDS_READ) reading.push(i);
        else {
          keys[i] = key;
          if (key !== Infinity && part.lowOnData()) reading.push(-1 - i);
        }
      }
    }
    if (reading.length > 1) await this.readSpans(context, reading);
    // Partition reads that have just read their files read their next ones ahead at once (spans
    // of reads ahead only, not waited for), before the records just read are checked and merged:
    // a whole-stream read's first reads bring every partition's current image together, and the
    // next images are wanted together too.
    if (reading.length > 1 && reading.some((i) => i >= 0)) await this.readSpans(context, reading);
    await forEachConcurrently(reading.length, READ_CONCURRENCY_MAX, async (k) => {
      const i = reading[k];
      if (i < 0) await this.parts[-1 - i].topUp(context);
      else keys[i] = await advanceReading(context, this.parts[i], limit);
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
      // The merge stopped at a partition read whose next record needs a read.
      const part = this.parts[waiting];
      this.settle(part, waiting, await advanceReading(context, part, limit), limit);
    }
    this.access.firstReadBytes = 0;
    this.resumeLimit = limit;
    this.resumeLayout = layout;
    if (out.length > 0) {
      this.lastSeq = out[out.length - 1].seq;
      this.denseKeys =
        out.length >= CALENDAR_PARTITIONS_MIN && 2 * out.length > this.lastSeq - out[0].seq + 1;
    }
    return out;
  }

  /**
   * Takes messages in seq order into `out` until the batch is full or nothing is left (-1), or
   * until a partition read's next record needs a disk read: then returns that partition read's
   * index, its message taken, for the caller to read and `settle`, and to call again.
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
    const bytesMax = batch === 1 ? this.firstBatchBytesMax : this.batchBytesMax;
    let bytes = this.batchBytes;
    while (!heap.empty() && bytes < bytesMax && out.length < READ_BATCH_MESSAGES_MAX) {
      const source = heap.topSource();
      const part = this.parts[source];
      let into: BorrowedMessage | null = null;
      if (borrowed !== null) {
        if (borrowed.length === out.length) borrowed.push(new BorrowedMessage());
        into = borrowed[out.length];
      }
      let message: StoredMessage;
      if (runs?.pending(source)) {
        // A record decoded ahead: the partition read's objects are not touched until its run ends.
        message = runs.take(source, into);
        bytes += runs.lastBytes;
        this.fromRuns++;
      } else {
        message = part.take(into);
        bytes += (message.length ?? message.payload.length) + message.topic.length;
      }
      out.push(message);
      if (runs?.pending(source)) {
        keys[source] = runs.headSeq(source);
        heap.advance(keys[source]);
        continue;
      }
      // The partition read moves: the next batch asks it whether it is low on data (see resume).
      if (this.touchedIn[source] !== batch) {
        this.touchedIn[source] = batch;
        this.touched[this.touchedCount++] = source;
      }
      const key = part.advance(context, limit);
      if (key === NEEDS_READ) {
        this.batchBytes = bytes;
        return source;
      }
      this.settle(part, source, key, limit);
    }
    this.batchBytes = bytes;
    return -1;
  }

  /**
   * `key` is the next seq of partition read `source` (its message taken): its run is decoded
   * (when it can be) and the merge goes on with it.
   */
  private settle(part: PartitionRead, source: number, key: number, limit: number): void {
    // The new head and the records after it, while the partition read's objects are in cache.
    if (this.runs !== null && key !== Infinity) part.decodeRun(this.runs, source, limit);
    this.keys[source] = key;
    this.heap.advance(key);
  }

  /**
   * Offers the reads of the partition reads in `reading` (k, or -1 - k for a top-up) to span reads
   * (span_read.ts): lanes about to read regions of one pack that lie back to back are served by
   * one read of the whole run. A lane takes at most SPAN_SHARE_CHUNKS of its chunks this way
   * (what its buffer and its read-ahead chunk would hold otherwise). A span read into memory (a
   * disk that does not map files) lives while any lane still reads its view; a mapped span holds
   * page-cache pages, no memory of its own (figures: docs/benchmarks.md#storage-issue-3).
   */
  private async readSpans(context: StoreContext, reading: readonly number[]): Promise<void> {
    const requests: SpanRequest[] = [];
    for (const k of reading) this.parts[k < 0 ? -1 - k : k].spanWants(requests);
    const tabulate = this.parts.length >= RUN_PARTITIONS_MIN;
    this.spansReadAhead += await readSpans(context, requests, tabulate);
  }

  private discover(context: StoreContext): void {
    const list = context.partitions.list;
    if (this.partitionsSeen === list.length) return;
    const fresh: PartitionLog[] = [];
    for (let i = this.partitionsSeen; i < list.length; i++)
      if (this.filter.touchesPartition(list[i].name)) fresh.push(list[i]);
    this.partitionsSeen = list.length;
    if (fresh.length === 0) return;
    const chunkBytes = Math.min(
      READ_CHUNK_BYTES_MAX,
      Math.floor(this.bufferBytes / (this.parts.length + fresh.length)),
    );
    const from: ReadFrom = this.lastSeq > 0 ? { afterSeq: this.lastSeq } : this.from;
    for (const log of fresh)
      this.parts.push(
        new PartitionRead(
          log,
          this.filter,
          this.topics,
          from,
          chunkBytes,
          this.subtreeMatches,
          this.pool,
          this.access,
        ),
      );
    this.access.sparse = this.parts.length <= list.length * SPARSE_PARTITIONS_SHARE;
  }
}
