/**
 * PartitionLog: what the store knows of one topic partition — its closed segments and the
 * records it has in the journal that are not yet sorted into a segment ("pending").
 *
 *   segments (closed, immutable files)       pending (journal positions, blocks of typed arrays)
 *   [s1 .. s2][s3 .. s4] ... sortedThrough │ head ───────────────── tail
 *                                           │ seq/time/gen/position/bytes of each record
 *
 * Pending records live in blocks of PENDING_BLOCK_ENTRIES that never move: an append at most
 * grows the newest block (up to its fixed size) or starts a new one, so a partition holding a
 * million records costs no multi-megabyte copy on the publish path, and an index stays valid
 * until its record is closed into a segment. Indexes count from the partition's first record
 * ever and only grow.
 *
 * After a split, the partition's oldest data lives in subtree stores instead (`subtreeStores`:
 * disjoint topic sets, overlapping seq ranges, each seq-ordered); every segment then starts after
 * the last seq of every subtree store, so "subtree stores, then segments, then pending" is still
 * the whole history.
 *
 * Invariants: segments are in increasing, disjoint seq ranges, all <= sortedThrough; pending
 * seqs increase and are all > sortedThrough; `version` changes whenever a segment or pending
 * record goes away, so a reader positioned in this partition knows to seek again.
 */
import { assert } from "../stdx/assert.ts";
import type { SegmentMeta } from "./segment_index.ts";
import type { SubtreeStoreMeta } from "./subtree_store_file.ts";

/** Entries of one block of pending records (a power of two). */
const PENDING_BLOCK_SHIFT = 12;
const PENDING_BLOCK_ENTRIES = 1 << PENDING_BLOCK_SHIFT;
const PENDING_BLOCK_MASK = PENDING_BLOCK_ENTRIES - 1;
/** Capacity of a partition's first block; it doubles up to PENDING_BLOCK_ENTRIES. */
const PENDING_CAPACITY_INITIAL = 16;

/** Fields of one pending record in a block's entries, and the entry stride. */
const SEQ = 0;
const TIME = 1;
const GEN = 2;
const POSITION = 3;
const LENGTH = 4;
const STRIDE = 5;

/**
 * seq, time, journal gen, journal position and bytes of up to PENDING_BLOCK_ENTRIES records, one
 * record after another in one array: a block is one allocation (10,000 partitions start 10,000
 * blocks, and each small one doubles a few times), and a record's fields lie side by side.
 */
class PendingBlock {
  readonly entries: Float64Array;

  constructor(readonly capacity: number) {
    this.entries = new Float64Array(capacity * STRIDE);
  }

  /** A block of `capacity` holding this block's entries [start, start + count) at its start. */
  copied(capacity: number, start: number, count: number): PendingBlock {
    const to = new PendingBlock(capacity);
    to.entries.set(this.entries.subarray(start * STRIDE, (start + count) * STRIDE));
    return to;
  }
}

/** One partition's closed segments and journal-resident records. */
export class PartitionLog {
  segments: SegmentMeta[] = [];
  /** Subtree stores in force (split output), by id. */
  subtreeStores: SubtreeStoreMeta[] = [];
  /** Highest seq of this partition ever sorted into a segment (0: none). */
  sortedThrough = 0;
  version = 0;
  /** Index of the oldest pending record. */
  pendingHead = 0;
  /** Index after the newest pending record. */
  pendingTail = 0;
  pendingBytes = 0;
  /** Blocks holding records [blocksBase, blocksBase + blocks.length * PENDING_BLOCK_ENTRIES). */
  private blocks: PendingBlock[] = [];
  private blocksBase = 0;

  /**
   * `layout`: a counter every partition of a store shares, bumped with any partition's `version`
   * (a reader resuming its merge between batches checks that nothing changed anywhere).
   */
  constructor(
    readonly name: string,
    private readonly layout: { version: number } = { version: 0 },
  ) {}

  private changed(): void {
    this.version++;
    this.layout.version++;
  }

  /** Records in the journal not yet in a segment. */
  get pendingCount(): number {
    return this.pendingTail - this.pendingHead;
  }

  /** Seq of the newest record of this partition (0: none). */
  get lastSeq(): number {
    if (this.pendingTail > this.pendingHead) return this.pendingSeq(this.pendingTail - 1);
    return this.sortedThrough;
  }

  /** Bytes of closed segments. */
  segmentBytes(): number {
    let total = 0;
    for (const segment of this.segments) total += segment.bytes;
    return total;
  }

  /** Notes a journal record of this partition. */
  addPending(seq: number, timeUs: number, gen: number, position: number, length: number): void {
    assert(seq > this.lastSeq, "partition_log: pending seqs must increase");
    const i = this.pendingTail++;
    const offset = (i - this.blocksBase) & PENDING_BLOCK_MASK;
    const b = (i - this.blocksBase) >>> PENDING_BLOCK_SHIFT;
    let block = this.blocks[b];
    if (block === undefined) {
      block = new PendingBlock(
        this.blocks.length === 0 ? PENDING_CAPACITY_INITIAL : PENDING_BLOCK_ENTRIES,
      );
      this.blocks.push(block);
    } else if (offset === block.capacity) {
      // Only a partition's small first block grows: it doubles, up to PENDING_BLOCK_ENTRIES.
      block = this.blocks[b] = block.copied(
        Math.min(PENDING_BLOCK_ENTRIES, block.capacity * 2),
        0,
        block.capacity,
      );
    }
    const entries = block.entries;
    const at = offset * STRIDE;
    entries[at + SEQ] = seq;
    entries[at + TIME] = timeUs;
    entries[at + GEN] = gen;
    entries[at + POSITION] = position;
    entries[at + LENGTH] = length;
    this.pendingBytes += length;
  }

  /** Seq of pending record `i` (pendingHead <= i < pendingTail). */
  pendingSeq(i: number): number {
    return this.field(i, SEQ);
  }

  /** Publish time (µs) of pending record `i`. */
  pendingTime(i: number): number {
    return this.field(i, TIME);
  }

  /** Journal generation of pending record `i`. */
  pendingGen(i: number): number {
    return this.field(i, GEN);
  }

  /** Journal position of pending record `i` (an int32, as pendingLength: see JOURNAL_POSITION_LIMIT in context.ts). */
  pendingPosition(i: number): number {
    return this.field(i, POSITION) | 0;
  }

  /**
   * Bytes of pending record `i`. `| 0`: a record's bytes fit an int32 (STORE_RECORD_BYTES_MAX),
   * and a value read from the Float64Array entries is a double to the engine: sums of them made
   * `pendingBytes` a double after each segment close, and every append's code compiled for an
   * int32 there left optimized code (hundreds of "BadType" exits and recompiles per run).
   */
  pendingLength(i: number): number {
    return this.field(i, LENGTH) | 0;
  }

  /** Bytes of the pending records [pendingHead, end), counted from whichever end is nearer. */
  pendingBytesBefore(end: number): number {
    if (end - this.pendingHead <= this.pendingTail - end)
      return this.pendingBytesBetween(this.pendingHead, end);
    return this.pendingBytes - this.pendingBytesBetween(end, this.pendingTail);
  }

  private pendingBytesBetween(from: number, end: number): number {
    let bytes = 0;
    for (let i = from; i < end; ) {
      const block = this.block(i);
      const from = (i - this.blocksBase) & PENDING_BLOCK_MASK;
      const to = Math.min(block.capacity, from + (end - i));
      const entries = block.entries;
      for (let k = from; k < to; k++) bytes += entries[k * STRIDE + LENGTH] | 0; // int32, as pendingLength
      i += to - from;
    }
    return bytes;
  }

  private block(i: number): PendingBlock {
    return this.blocks[(i - this.blocksBase) >>> PENDING_BLOCK_SHIFT];
  }

  private field(i: number, field: number): number {
    return this.block(i).entries[((i - this.blocksBase) & PENDING_BLOCK_MASK) * STRIDE + field];
  }

  /** Index of the first pending record with seq > `seq` (pendingTail when none). */
  pendingAfter(seq: number): number {
    let lo = this.pendingHead;
    let hi = this.pendingTail;
    while (lo < hi) {
      const mid = lo + Math.floor((hi - lo) / 2);
      if (this.pendingSeq(mid) <= seq) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  /** Records a closed segment holding pending[head, end): they leave the pending list. */
  closeSegment(segment: SegmentMeta, end: number): void {
    assert(
      end > this.pendingHead && end <= this.pendingTail,
      "partition_log: close range out of bounds",
    );
    assert(
      segment.lastSeq === this.pendingSeq(end - 1),
      "partition_log: segment ends at the last closed record",
    );
    this.pendingBytes -= this.pendingBytesBefore(end);
    this.pendingHead = end;
    // Blocks wholly before the head go (their memory with them).
    const drop = Math.min(this.blocks.length, (end - this.blocksBase) >>> PENDING_BLOCK_SHIFT);
    if (drop > 0) {
      this.blocks.splice(0, drop);
      this.blocksBase += drop * PENDING_BLOCK_ENTRIES;
    }
    // Give back what a burst grew: a few records left in a large block move to a small one.
    const count = this.pendingTail - this.pendingHead;
    if (
      this.blocks.length === 1 &&
      this.blocks[0].capacity > PENDING_CAPACITY_INITIAL &&
      count * 4 <= this.blocks[0].capacity
    ) {
      this.compact(count);
    }
    this.segments.push(segment);
    this.sortedThrough = segment.lastSeq;
    this.changed();
  }

  /** Bytes of subtree stores. */
  storeBytes(): number {
    let total = 0;
    for (const subtree of this.subtreeStores) total += subtree.bytes;
    return total;
  }

  /**
   * Applies a split's switch: segments and subtree stores of `removed` go, `added` subtree stores
   * come.
   */
  swap(removed: ReadonlySet<number>, added: readonly SubtreeStoreMeta[]): void {
    this.segments = this.segments.filter((segment) => !removed.has(segment.id));
    this.subtreeStores = this.subtreeStores
      .filter((subtree) => !removed.has(subtree.id))
      .concat(added);
    let subtreesThrough = 0;
    for (const subtree of this.subtreeStores)
      subtreesThrough = Math.max(subtreesThrough, subtree.lastSeq);
    assert(
      this.segments.length === 0 || this.segments[0].firstSeq > subtreesThrough,
      "partition_log: segments follow the stores",
    );
    this.sortedThrough = Math.max(this.sortedThrough, subtreesThrough);
    this.changed();
  }

  /** Forgets segment `id` (retention removed it). */
  removeSegment(id: number): void {
    this.segments = this.segments.filter((segment) => segment.id !== id);
    this.changed();
  }

  /** Moves the `count` pending records (all in the only block) to the start of a right-sized block. */
  private compact(count: number): void {
    const capacity = Math.max(
      PENDING_CAPACITY_INITIAL,
      2 ** Math.ceil(Math.log2(Math.max(1, count * 2))),
    );
    this.blocks[0] = this.blocks[0].copied(capacity, this.pendingHead - this.blocksBase, count);
    this.blocksBase = this.pendingHead;
  }
}
