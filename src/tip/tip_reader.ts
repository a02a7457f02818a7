/**
 * Tip cursors: read, in seq order, every record of the ring with seq in [fromSeq, endSeq) whose
 * topic matches a filter, as offsets into the ring's bytes (zero-copy). endSeq is the ring's
 * nextSeq when the cursor was made: a cursor is a snapshot, and its owner makes a new one from
 * `resumeSeq` to see later appends.
 *
 * - LinearCursor walks every record from fromSeq and tests its topic: the baseline.
 * - IndexedCursor merges the indexes of only the partitions the filter touches on a min-heap
 *   keyed by seq, so it visits only their records.
 *
 * A cursor never reads memory the ring has reused: each next() first checks that the ring still
 * holds resumeSeq, and when it does not, stops with fellBehind set (the owner goes to disk).
 * Appends between next() calls are allowed; nothing here allocates per record.
 */
import { INDEX_BLOCK_ENTRIES, RECORD_ALIGN_BYTES } from "../constants.ts";
import type { FilterMatcher } from "../topic/filter_matcher.ts";
import { BLOCK_NONE, ENTRY_WORDS, type BlockPool } from "./block_pool.ts";
import type { MergeHeap } from "./heap/mod.ts";
import type { PartitionIndexes } from "./partition_index.ts";
import type { Ring } from "./ring.ts";

/** How a cursor finds its records. */
export type ReadStrategy = "linear" | "indexed";

/** A snapshot read of the tip. */
export interface TipCursor {
  readonly strategy: ReadStrategy;
  /** Moves to the next matching record; false at the end, or when the ring moved past (see fellBehind). */
  next(): boolean;
  /** Ring offset of the current record (valid after next() returned true). */
  readonly offset: number;
  /** The seq to resume from: one past the last record this cursor has passed. */
  readonly resumeSeq: number;
  /** True when next() stopped because the ring evicted records this cursor had not read yet. */
  readonly fellBehind: boolean;
}

/** Reads by scanning every record from fromSeq. */
export class LinearCursor implements TipCursor {
  readonly strategy = "linear";
  offset = -1;
  resumeSeq: number;
  fellBehind = false;
  private at: number;
  private readonly endSeq: number;

  constructor(
    private readonly ring: Ring,
    private readonly matcher: FilterMatcher,
    fromSeq: number,
  ) {
    this.resumeSeq = Math.max(fromSeq, ring.firstSeq);
    this.endSeq = ring.nextSeq;
    this.at = this.resumeSeq < this.endSeq ? ring.offsetOfSeq(this.resumeSeq) : -1;
  }

  next(): boolean {
    const ring = this.ring;
    if (ring.firstSeq > this.resumeSeq) {
      this.fellBehind = true;
      return false;
    }
    const matcher = this.matcher;
    const endSeq = this.endSeq;
    let seq = this.resumeSeq;
    let at = this.at;
    while (seq < endSeq) {
      const current = at;
      seq++;
      if (seq < endSeq) at = ring.after(current);
      if (matcher.matches(ring.topicAt(current))) {
        this.resumeSeq = seq;
        this.at = at;
        this.offset = current;
        return true;
      }
    }
    this.resumeSeq = seq;
    this.at = at;
    return false;
  }
}

/** Reads by merging the partition indexes the filter touches. */
export class IndexedCursor implements TipCursor {
  readonly strategy = "indexed";
  offset = -1;
  resumeSeq: number;
  fellBehind = false;
  private readonly endSeq: number;
  private readonly sourcePartition: Int32Array;
  /** Per source: the block it is in, and the entry word it is at (BLOCK_NONE when exhausted). */
  private readonly sourceBlock: Int32Array;
  private readonly sourceWord: Int32Array;

  constructor(
    private readonly ring: Ring,
    private readonly indexes: PartitionIndexes,
    private readonly matcher: FilterMatcher,
    private readonly heap: MergeHeap,
    fromSeq: number,
    partitions: Int32Array,
  ) {
    this.resumeSeq = Math.max(fromSeq, ring.firstSeq);
    this.endSeq = ring.nextSeq;
    const count = partitions.length;
    this.sourcePartition = partitions;
    this.sourceBlock = new Int32Array(count);
    this.sourceWord = new Int32Array(count);
    const keys = new Float64Array(count);
    for (let source = 0; source < count; source++) keys[source] = this.seek(source, this.resumeSeq);
    heap.init(keys, count);
  }

  next(): boolean {
    const ring = this.ring;
    if (ring.firstSeq > this.resumeSeq) {
      this.fellBehind = true;
      return false;
    }
    const heap = this.heap;
    const entries = this.indexes.pool.entries;
    const endSeq = this.endSeq;
    const matcher = this.matcher;
    while (!heap.empty()) {
      const seq = heap.topKey();
      if (seq >= endSeq) break;
      const source = heap.topSource();
      const at = entries[this.sourceWord[source]] * RECORD_ALIGN_BYTES;
      heap.advance(this.step(source));
      this.resumeSeq = seq + 1;
      if (matcher.matches(ring.topicAt(at))) {
        this.offset = at;
        return true;
      }
    }
    this.resumeSeq = endSeq;
    return false;
  }

  /** Positions `source` at its first entry with seq ≥ fromSeq; returns that seq or Infinity. */
  private seek(source: number, fromSeq: number): number {
    const p = this.sourcePartition[source];
    const indexes = this.indexes;
    const pool: BlockPool = indexes.pool;
    let block = p < indexes.partitionCapacity ? indexes.headBlock[p] : BLOCK_NONE;
    if (block === BLOCK_NONE) return this.exhaust(source);
    let low = indexes.headEntry[p];
    // Skip whole blocks that end before fromSeq, then binary-search the block's seq deltas.
    for (let next = pool.next[block]; next !== BLOCK_NONE && pool.firstSeq[next] <= fromSeq; next = pool.next[block]) {
      block = next;
      low = 0;
    }
    let high = pool.count[block];
    const base = block * INDEX_BLOCK_ENTRIES;
    const delta = fromSeq - pool.firstSeq[block];
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (pool.entries[(base + middle) * ENTRY_WORDS + 1] < delta) low = middle + 1;
      else high = middle;
    }
    this.sourceBlock[source] = block;
    this.sourceWord[source] = (base + low) * ENTRY_WORDS;
    if (low === pool.count[block]) return this.nextBlock(source);
    return pool.firstSeq[block] + pool.entries[(base + low) * ENTRY_WORDS + 1];
  }

  /** Moves `source` one entry on; returns the seq there, or Infinity past the partition's end. */
  private step(source: number): number {
    const pool = this.indexes.pool;
    const block = this.sourceBlock[source];
    const word = this.sourceWord[source] + ENTRY_WORDS;
    if (word >= (block * INDEX_BLOCK_ENTRIES + pool.count[block]) * ENTRY_WORDS) return this.nextBlock(source);
    this.sourceWord[source] = word;
    return pool.firstSeq[block] + pool.entries[word + 1];
  }

  /** Moves `source` to the first entry of its next block; Infinity when there is none. */
  private nextBlock(source: number): number {
    const pool = this.indexes.pool;
    const block = pool.next[this.sourceBlock[source]];
    if (block === BLOCK_NONE || pool.count[block] === 0) return this.exhaust(source);
    this.sourceBlock[source] = block;
    this.sourceWord[source] = block * INDEX_BLOCK_ENTRIES * ENTRY_WORDS;
    return pool.firstSeq[block] + pool.entries[block * INDEX_BLOCK_ENTRIES * ENTRY_WORDS + 1];
  }

  private exhaust(source: number): number {
    this.sourceBlock[source] = BLOCK_NONE;
    return Infinity;
  }
}
