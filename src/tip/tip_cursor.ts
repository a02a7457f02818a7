/**
 * Tip cursors: read, in seq order, every record of the ring with seq in [fromSeq, endSeq) whose
 * topic matches a filter, as offsets into the ring's bytes (zero-copy). endSeq is at most the
 * ring's nextSeq when the cursor was made: a cursor is a snapshot, and its owner makes a new one
 * from `resumeSeq` to see later appends.
 *
 * - LinearCursor walks every record from fromSeq and tests its topic: the baseline.
 * - IndexedCursor merges the indexes of only the partitions the filter touches on a min-heap
 *   keyed by seq, so it visits only their records.
 *
 * A cursor never reads memory the ring has reused: each next() first checks that the ring still
 * holds resumeSeq, and when it does not, stops with fellBehind set (the owner goes to disk).
 * Appends between next() calls are allowed; nothing here allocates per record.
 */
import { RECORD_ALIGN_BYTES } from "../constants.ts";
import type { FilterMatcher } from "../topic/filter_matcher.ts";
import { BLOCK_NONE, BLOCK_UNIT_ENTRIES, ENTRY_WORDS, type BlockPool } from "./block_pool.ts";
import type { MergeHeap } from "../merge/mod.ts";
import type { PartitionIndexes } from "./partition_index.ts";
import { TOPIC_ID_MASK, TOPIC_U32, type Ring } from "./ring.ts";

/** Records an indexed cursor merges and topic-checks at a time. */
export const INDEXED_BATCH_RECORDS = 128;

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
    endSeq = ring.nextSeq,
  ) {
    this.resumeSeq = Math.max(fromSeq, ring.firstSeq);
    this.endSeq = Math.min(endSeq, ring.nextSeq);
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
  /** Per source: the word past its block's last entry, and the block's seq base. */
  private readonly sourceEnd: Int32Array;
  private readonly sourceBase: Float64Array;
  /** Records merged ahead of the caller: offsets and seqs, topic-checked as one batch. */
  private readonly batchOffsets = new Int32Array(INDEXED_BATCH_RECORDS);
  private readonly batchSeqs = new Float64Array(INDEXED_BATCH_RECORDS);
  private batchIndex = 0;
  private batchCount = 0;

  constructor(
    private readonly ring: Ring,
    private readonly indexes: PartitionIndexes,
    private readonly matcher: FilterMatcher,
    private readonly heap: MergeHeap,
    fromSeq: number,
    partitions: Int32Array,
    endSeq = ring.nextSeq,
  ) {
    this.resumeSeq = Math.max(fromSeq, ring.firstSeq);
    this.endSeq = Math.min(endSeq, ring.nextSeq);
    const count = partitions.length;
    this.sourcePartition = partitions;
    this.sourceBlock = new Int32Array(count);
    this.sourceWord = new Int32Array(count);
    this.sourceEnd = new Int32Array(count);
    this.sourceBase = new Float64Array(count);
    const keys = new Float64Array(count);
    for (let source = 0; source < count; source++) keys[source] = this.seek(source, this.resumeSeq);
    heap.init(keys, count);
  }

  next(): boolean {
    if (this.ring.firstSeq > this.resumeSeq) {
      this.fellBehind = true;
      return false;
    }
    while (this.batchIndex === this.batchCount) {
      if (!this.fill()) {
        this.resumeSeq = this.endSeq;
        return false;
      }
    }
    const index = this.batchIndex++;
    this.offset = this.batchOffsets[index];
    this.resumeSeq = this.batchSeqs[index] + 1;
    return true;
  }

  /**
   * Merges the next batch of entries from the index alone (seqs live in the index, so no ring
   * access), then checks the batch's topics in one tight loop: its ring loads do not depend on
   * each other, so the CPU overlaps their cache misses instead of taking them one at a time.
   * Returns false when the merge has nothing left before endSeq.
   */
  private fill(): boolean {
    const heap = this.heap;
    const entries = this.indexes.pool.entries;
    const offsets = this.batchOffsets;
    const seqs = this.batchSeqs;
    let count = 0;
    while (count < INDEXED_BATCH_RECORDS && !heap.empty()) {
      const seq = heap.topKey();
      if (seq >= this.endSeq) break;
      const source = heap.topSource();
      offsets[count] = entries[this.sourceWord[source]] * RECORD_ALIGN_BYTES;
      seqs[count++] = seq;
      heap.advance(this.step(source));
    }
    if (count === 0) return false;
    const u32 = this.ring.u32;
    const matcher = this.matcher;
    let kept = 0;
    for (let i = 0; i < count; i++) {
      const at = offsets[i];
      if (matcher.matches(u32[(at >> 2) + TOPIC_U32] & TOPIC_ID_MASK)) {
        offsets[kept] = at;
        seqs[kept++] = seqs[i];
      }
    }
    this.batchIndex = 0;
    this.batchCount = kept;
    return true;
  }

  /** Positions `source` at its first entry with seq ≥ fromSeq; returns that seq or Infinity. */
  private seek(source: number, fromSeq: number): number {
    const p = this.sourcePartition[source];
    const indexes = this.indexes;
    const pool: BlockPool = indexes.pool;
    let block = indexes.headBlockOf(p);
    if (block === BLOCK_NONE) return this.exhaust(source);
    let low = indexes.headEntryOf(p);
    // Skip whole blocks that end before fromSeq, then binary-search the block's seq deltas.
    for (
      let next = pool.next[block];
      next !== BLOCK_NONE && pool.firstSeq[next] <= fromSeq;
      next = pool.next[block]
    ) {
      block = next;
      low = 0;
    }
    const count = indexes.countOf(p, block);
    let high = count;
    const base = block * BLOCK_UNIT_ENTRIES;
    const delta = fromSeq - pool.firstSeq[block];
    while (low < high) {
      const middle = (low + high) >>> 1;
      if (pool.entries[(base + middle) * ENTRY_WORDS + 1] < delta) low = middle + 1;
      else high = middle;
    }
    this.enterBlock(source, block, low);
    if (low === count) return this.nextBlock(source);
    return this.sourceBase[source] + pool.entries[this.sourceWord[source] + 1];
  }

  /** Moves `source` one entry on; returns the seq there, or Infinity past the partition's end. */
  private step(source: number): number {
    const word = this.sourceWord[source] + ENTRY_WORDS;
    if (word >= this.sourceEnd[source]) return this.nextBlock(source);
    this.sourceWord[source] = word;
    return this.sourceBase[source] + this.indexes.pool.entries[word + 1];
  }

  /** Moves `source` to the first entry of its next block; Infinity when there is none. */
  private nextBlock(source: number): number {
    const pool = this.indexes.pool;
    const block = pool.next[this.sourceBlock[source]];
    if (block === BLOCK_NONE || this.indexes.countOf(this.sourcePartition[source], block) === 0)
      return this.exhaust(source);
    this.enterBlock(source, block, 0);
    return this.sourceBase[source] + pool.entries[this.sourceWord[source] + 1];
  }

  /**
   * Points `source` at entry `entry` of `block`, caching the block's seq base and end. Every
   * entry with seq < endSeq existed when this cursor was made, so the end read now stays valid.
   */
  private enterBlock(source: number, block: number, entry: number): void {
    const pool = this.indexes.pool;
    const base = block * BLOCK_UNIT_ENTRIES;
    this.sourceBlock[source] = block;
    this.sourceWord[source] = (base + entry) * ENTRY_WORDS;
    const count = this.indexes.countOf(this.sourcePartition[source], block);
    this.sourceEnd[source] = (base + count) * ENTRY_WORDS;
    this.sourceBase[source] = pool.firstSeq[block];
  }

  private exhaust(source: number): number {
    this.sourceBlock[source] = BLOCK_NONE;
    return Infinity;
  }
}
