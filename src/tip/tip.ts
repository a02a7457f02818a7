/**
 * Tip: the newest part of the stream in memory, and indexed tip recovery over it. Owns the ring,
 * the shared block pool and the partition indexes, and keeps them in step: every record in the
 * ring has exactly one index entry in its partition, in seq order.
 *
 *   append(topic, seq, time, payload)
 *     ├─ ring.append ── evicts oldest records ─▶ indexes.dropOldest(partition) ─▶ pool.release
 *     └─ indexes.push(partition, offset)  ◀── pool.acquire
 *
 * When the pool has no block for a partition that needs one, the tip evicts its oldest records
 * until a block comes free: the ring holds fewer bytes, but nothing is lost (older seqs are on
 * disk) and memory never grows past the pool's limit.
 *
 * read(matcher, fromSeq) picks a strategy (see read_strategy.ts) unless one is forced, or answers
 * "too old" with the first seq still held when fromSeq is older than the ring.
 *
 * Delivery (the broker's live fan-out and catch-up) reads `records`: the ring seen through
 * TipRecords — positions, topic ids, sizes, and records handed to frame writers as ranges of the
 * ring — so the record layout never leaves src/tip.
 */
import { POOL_BLOCKS_DEFAULT, RECORD_ALIGN_BYTES, TIP_BYTES_DEFAULT } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import type { FilterMatcher } from "../topic/filter_matcher.ts";
import type { TopicTable } from "../topic/topic_table.ts";
import { BlockPool } from "./block_pool.ts";
import { createMergeHeap } from "../merge/mod.ts";
import { PartitionIndexes } from "./partition_index.ts";
import { chooseReadStrategy, type ReadChoice } from "./read_strategy.ts";
import { Ring, type TipRecords } from "./ring.ts";
import { IndexedCursor, LinearCursor, type TipCursor } from "./tip_cursor.ts";

/** Sizes of a tip; tests shrink them to reach wrap-around and pool exhaustion quickly. */
export interface TipOptions {
  capacityBytes?: number;
  /** Pages of the block pool (INDEX_BLOCK_ENTRIES entries each, cut into smaller blocks). */
  poolBlocks?: number;
}

/** The outcome of starting a read. */
export type TipRead =
  | { ok: true; cursor: TipCursor }
  | { ok: false; reason: "too-old"; firstSeq: number };

/** Counters of a tip, for metrics and tests; poolBlocks* count pool pages (see block_pool.ts). */
export interface TipStats {
  capacityBytes: number;
  bytesUsed: number;
  records: number;
  firstSeq: number;
  nextSeq: number;
  poolBlocksUsed: number;
  poolBlocksFree: number;
  poolBlocksMax: number;
  indexEntriesLive: number;
  indexBytesUsed: number;
  evictionsForPool: number;
}

/** The in-memory tip: ring, block pool and partition indexes. */
export class Tip {
  readonly ring: Ring;
  readonly pool: BlockPool;
  readonly indexes: PartitionIndexes;
  private partitionByTopic: Int32Array;
  private evictionsForPool = 0;

  constructor(
    readonly topics: TopicTable,
    options: TipOptions = {},
  ) {
    this.pool = new BlockPool(options.poolBlocks ?? POOL_BLOCKS_DEFAULT);
    this.indexes = new PartitionIndexes(this.pool);
    this.partitionByTopic = topics.partitionsByTopic();
    this.ring = new Ring(options.capacityBytes ?? TIP_BYTES_DEFAULT, (topicId) => {
      this.indexes.dropOldest(this.partitionByTopic[topicId]);
    });
  }

  /**
   * Appends one message, its payload payload[start, start + length) (all of it by default) and its
   * properties properties[propertiesStart, + propertiesBytes) (none by default); `seq` must be the
   * ring's nextSeq (or later when the tip is empty).
   */
  append(
    topicId: number,
    seq: number,
    timeUs: number,
    payload: Uint8Array,
    start = 0,
    length = payload.length - start,
    properties: Uint8Array = payload,
    propertiesStart = 0,
    propertiesBytes = 0,
  ): void {
    if (topicId >= this.partitionByTopic.length)
      this.partitionByTopic = this.topics.partitionsByTopic();
    assert(topicId < this.topics.topicCount, "Tip.append: topic id is interned");
    const partition = this.partitionByTopic[topicId];
    // The topic's id is not reclaimed while this record is held (topic_table.ts).
    this.topics.seen(topicId, seq);
    if (this.indexes.needsBlock(partition, seq) && !this.pool.canAcquire()) this.evictForBlock();
    const at = this.ring.append(
      topicId,
      seq,
      timeUs,
      payload,
      start,
      length,
      properties,
      propertiesStart,
      propertiesBytes,
    );
    if (at < 0) return;
    const pushed = this.indexes.push(partition, at / RECORD_ALIGN_BYTES, seq);
    assert(pushed, "Tip.append: a block was free for the index entry");
  }

  /** The records held, as delivery reads them (the ring through its TipRecords face). */
  get records(): TipRecords {
    return this.ring;
  }

  /** Positions an empty tip so its next append is `seq` (a server starting on a stored stream). */
  startAt(seq: number): void {
    this.ring.startAt(seq);
  }

  /**
   * True when the oldest record held was published before `timeUs`: every seq published at or
   * after it is then held. Strictly before, because evicted seqs may share the oldest held time
   * (a PUBLISH batch's messages all do), and those are on disk only.
   */
  holdsFromTime(timeUs: number): boolean {
    return this.ring.count > 0 && this.ring.oldestTimeUs() < timeUs;
  }

  /**
   * Starts a read of the records matching `matcher` with fromSeq <= seq < endSeq (default: all
   * the ring holds; a server passes its visible watermark so nothing unacknowledged leaks).
   */
  read(
    matcher: FilterMatcher,
    fromSeq: number,
    options: { strategy?: ReadChoice; endSeq?: number } = {},
  ): TipRead {
    const ring = this.ring;
    if (Math.max(fromSeq, 1) < ring.firstSeq)
      return { ok: false, reason: "too-old", firstSeq: ring.firstSeq };
    const endSeq = Math.min(options.endSeq ?? ring.nextSeq, ring.nextSeq);
    const partitions = this.livePartitions(matcher);
    const strategy =
      options.strategy === undefined || options.strategy === "planned"
        ? chooseReadStrategy({
            partitions,
            live: this.indexes,
            ringRecords: ring.count,
            fromSeq,
            firstSeq: ring.firstSeq,
            nextSeq: endSeq,
          })
        : options.strategy;
    if (strategy === "linear")
      return { ok: true, cursor: new LinearCursor(ring, matcher, fromSeq, endSeq) };
    const heap = createMergeHeap(partitions.length);
    return {
      ok: true,
      cursor: new IndexedCursor(ring, this.indexes, matcher, heap, fromSeq, partitions, endSeq),
    };
  }

  /** The first seq held whose publish time is at or after `timeUs` (nextSeq when none is). */
  seqAtTime(timeUs: number): number {
    const ring = this.ring;
    let low = ring.firstSeq;
    let high = ring.nextSeq;
    while (low < high) {
      const middle = Math.floor((low + high) / 2);
      if (ring.timeAt(ring.offsetOfSeq(middle)) < timeUs) low = middle + 1;
      else high = middle;
    }
    return low;
  }

  /** Counters for metrics. */
  stats(): TipStats {
    return {
      capacityBytes: this.ring.capacityBytes,
      bytesUsed: this.ring.bytesUsed,
      records: this.ring.count,
      firstSeq: this.ring.firstSeq,
      nextSeq: this.ring.nextSeq,
      poolBlocksUsed: this.pool.pagesUsed,
      poolBlocksFree: this.pool.pagesFree,
      poolBlocksMax: this.pool.pagesMax,
      indexEntriesLive: this.indexes.entriesLiveCount,
      indexBytesUsed: this.pool.bytesUsed(),
      evictionsForPool: this.evictionsForPool,
    };
  }

  /** The partitions the filter touches that hold live records. */
  private livePartitions(matcher: FilterMatcher): Int32Array {
    const touched = matcher.partitions();
    const indexes = this.indexes;
    let count = 0;
    for (let i = 0; i < touched.length; i++) if (indexes.liveOf(touched[i]) > 0) count++;
    if (count === touched.length) return touched;
    const result = new Int32Array(count);
    count = 0;
    for (let i = 0; i < touched.length; i++)
      if (indexes.liveOf(touched[i]) > 0) result[count++] = touched[i];
    return result;
  }

  private evictForBlock(): void {
    while (!this.pool.canAcquire() && this.ring.count > 0) {
      this.ring.evictOldest();
      this.evictionsForPool++;
    }
    assert(this.pool.canAcquire(), "Tip: an empty ring frees every block");
  }
}
