/**
 * PartitionIndexes: for every partition, where its live messages sit in the ring, as a chain of
 * pool blocks of entries (ring offset, seq delta; see block_pool.ts). Appends go to the tail
 * block of the chain; evictions consume the head block from the front; a block goes back to the
 * pool the moment its last entry is evicted.
 *
 *   partition p:  headBlock ─next─▶ block ─next─▶ tailBlock
 *                 [·····|xxxxxxx]   [xxxxxxxxxx]   [xxxxx|      ]
 *                  ▲headEntry                             ▲tailCount
 *
 * A new tail block's size class follows the partition's live entries (classForLive): a cold
 * partition holds 16-entry blocks, a busy one 1,024-entry blocks, and a partition that heats up
 * grows by chaining larger blocks (nothing is copied; its small blocks leave as the ring evicts).
 *
 * One PARTITION_RECORD_BYTES record per partition (half a cache line; views of one buffer):
 *
 *   +0 i32 headBlock  +4 i32 tailBlock  +8 i32 live  +12 u16 headEntry  +14 u16 headEnd
 *   +16 u16 tailCount  +18 u16 tailCapacity  +20 (unused)  +24 f64 tailBase (the tail's firstSeq)
 *
 * An append or an eviction at 100,000 partitions reads one line of partition state instead of
 * one per array (3.2 MB of records stay cached better than 6.4 MB would), and the tail
 * block's count, capacity and seq base live there, so an append touches the pool only to write
 * the entry; a block's count goes to pool.count when it is closed (countOf reads either).
 * No object per partition.
 *
 * Invariants per partition: live === entries from (headBlock, headEntry) to the end of
 * tailBlock; live === 0 ⇔ headBlock === BLOCK_NONE ⇔ tailBlock === BLOCK_NONE; entries are in
 * seq order; pool.count holds the count of every closed block (all but the tail); headEnd ===
 * pool.count[headBlock] when the head is not the tail; the sum of live over partitions equals the ring's record count.
 */
import { PARTITIONS_MAX } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import {
  BLOCK_NONE,
  BLOCK_UNIT_ENTRIES,
  classForLive,
  ENTRY_SEQ_DELTA_MAX,
  ENTRY_WORDS,
  type BlockPool,
} from "./block_pool.ts";

const PARTITIONS_INITIAL = 64;

/** Bytes of one partition's record. */
export const PARTITION_RECORD_BYTES = 32;
/** Fields of a record, as indexes into the i32, u16 and f64 views at record p * (words per record). */
const I32_WORDS = PARTITION_RECORD_BYTES / 4;
const U16_WORDS = PARTITION_RECORD_BYTES / 2;
const F64_WORDS = PARTITION_RECORD_BYTES / 8;
const HEAD_BLOCK = 0;
const TAIL_BLOCK = 1;
const LIVE = 2;
const HEAD_ENTRY = 6;
/** Entries of the head block, cached once the head is not the tail (the head block is closed). */
const HEAD_END = 7;
const TAIL_COUNT = 8;
const TAIL_CAPACITY = 9;
/** Seq base of the tail block (its firstSeq). */
const TAIL_BASE = 3;

/** The indexes of all partitions over one shared block pool. */
export class PartitionIndexes {
  private i32: Int32Array = new Int32Array(0);
  private u16: Uint16Array = new Uint16Array(0);
  private f64: Float64Array = new Float64Array(0);
  private partitions = 0;
  private entriesLive = 0;

  constructor(readonly pool: BlockPool) {
    this.grow(PARTITIONS_INITIAL - 1);
  }

  /** Partitions with room in these arrays (ids below it are valid). */
  get partitionCapacity(): number {
    return this.partitions;
  }

  /** Live index entries over all partitions (= messages in the ring). */
  get entriesLiveCount(): number {
    return this.entriesLive;
  }

  /** Live entries of partition `p` (0 for ids never indexed). */
  liveOf(p: number): number {
    return p < this.partitions ? this.i32[p * I32_WORDS + LIVE] : 0;
  }

  /** First block of partition `p`'s chain (BLOCK_NONE when it holds nothing). */
  headBlockOf(p: number): number {
    return p < this.partitions ? this.i32[p * I32_WORDS + HEAD_BLOCK] : BLOCK_NONE;
  }

  /** Entry of the head block where partition `p`'s live entries start. */
  headEntryOf(p: number): number {
    return this.u16[p * U16_WORDS + HEAD_ENTRY];
  }

  /** Last block of partition `p`'s chain (BLOCK_NONE when it holds nothing). */
  tailBlockOf(p: number): number {
    return p < this.partitions ? this.i32[p * I32_WORDS + TAIL_BLOCK] : BLOCK_NONE;
  }

  /** Entries written to `block`, a block of partition `p`'s chain. */
  countOf(p: number, block: number): number {
    return block === this.i32[p * I32_WORDS + TAIL_BLOCK]
      ? this.u16[p * U16_WORDS + TAIL_COUNT]
      : this.pool.count[block];
  }

  /** True when appending seq `seq` to partition `p` needs a block the pool must supply. */
  needsBlock(p: number, seq: number): boolean {
    if (p >= this.partitions) return true;
    const u16 = this.u16;
    const at = p * U16_WORDS;
    return (
      u16[at + TAIL_COUNT] === u16[at + TAIL_CAPACITY] ||
      seq - this.f64[p * F64_WORDS + TAIL_BASE] > ENTRY_SEQ_DELTA_MAX
    );
  }

  /**
   * Appends the entry for message `seq` of partition `p` at ring offset `offsetUnits`.
   * Returns false, changing nothing, when a new block is needed and the pool is exhausted.
   */
  push(p: number, offsetUnits: number, seq: number): boolean {
    if (this.needsBlock(p, seq) && !this.addBlock(p, seq)) return false;
    const u16 = this.u16;
    const at = p * U16_WORDS;
    const tail = this.i32[p * I32_WORDS + TAIL_BLOCK];
    const count = u16[at + TAIL_COUNT];
    const word = (tail * BLOCK_UNIT_ENTRIES + count) * ENTRY_WORDS;
    const entries = this.pool.entries;
    entries[word] = offsetUnits;
    entries[word + 1] = seq - this.f64[p * F64_WORDS + TAIL_BASE];
    u16[at + TAIL_COUNT] = count + 1;
    this.i32[p * I32_WORDS + LIVE]++;
    this.entriesLive++;
    return true;
  }

  /** Drops the oldest entry of partition `p` (its message left the ring); frees emptied blocks. */
  dropOldest(p: number): void {
    const i32 = this.i32;
    const u16 = this.u16;
    const at = p * I32_WORDS;
    const at16 = p * U16_WORDS;
    assert(p < this.partitions && i32[at + LIVE] > 0, "dropOldest: partition has live entries");
    i32[at + LIVE]--;
    this.entriesLive--;
    const head = i32[at + HEAD_BLOCK];
    const entry = ++u16[at16 + HEAD_ENTRY];
    const end = head === i32[at + TAIL_BLOCK] ? u16[at16 + TAIL_COUNT] : u16[at16 + HEAD_END];
    if (entry < end) return;
    const pool = this.pool;
    const next = pool.next[head];
    pool.release(head);
    i32[at + HEAD_BLOCK] = next;
    u16[at16 + HEAD_ENTRY] = 0;
    if (next === BLOCK_NONE) {
      assert(i32[at + LIVE] === 0, "dropOldest: a partition with live entries keeps a block");
      i32[at + TAIL_BLOCK] = BLOCK_NONE;
      u16[at16 + TAIL_COUNT] = 0;
      u16[at16 + TAIL_CAPACITY] = 0;
    } else {
      u16[at16 + HEAD_END] = pool.count[next];
    }
  }

  /** Chains a new tail block to partition `p` for seq `seq`; false when the pool has none. */
  private addBlock(p: number, seq: number): boolean {
    if (p >= this.partitions) this.grow(p);
    const i32 = this.i32;
    const u16 = this.u16;
    const at = p * I32_WORDS;
    const at16 = p * U16_WORDS;
    const pool = this.pool;
    const block = pool.acquire(classForLive(i32[at + LIVE]));
    if (block === BLOCK_NONE) return false;
    pool.firstSeq[block] = seq;
    const tail = i32[at + TAIL_BLOCK];
    if (tail === BLOCK_NONE) {
      i32[at + HEAD_BLOCK] = block;
      u16[at16 + HEAD_ENTRY] = 0;
    } else {
      // The old tail is closed: its count is final.
      pool.next[tail] = block;
      pool.count[tail] = u16[at16 + TAIL_COUNT];
      if (tail === i32[at + HEAD_BLOCK]) u16[at16 + HEAD_END] = u16[at16 + TAIL_COUNT];
    }
    i32[at + TAIL_BLOCK] = block;
    u16[at16 + TAIL_COUNT] = 0;
    u16[at16 + TAIL_CAPACITY] = pool.capacityOf(block);
    this.f64[p * F64_WORDS + TAIL_BASE] = seq;
    return true;
  }

  /** Makes room for partition ids up to `p`: new records hold no blocks. */
  private grow(p: number): void {
    assert(p < PARTITIONS_MAX, "PartitionIndexes: partition id below PARTITIONS_MAX");
    let partitions = Math.max(this.partitions, 1);
    while (partitions <= p) partitions *= 2;
    const buffer = new ArrayBuffer(partitions * PARTITION_RECORD_BYTES);
    const i32 = new Int32Array(buffer);
    i32.set(this.i32);
    for (let q = this.partitions; q < partitions; q++) {
      i32[q * I32_WORDS + HEAD_BLOCK] = BLOCK_NONE;
      i32[q * I32_WORDS + TAIL_BLOCK] = BLOCK_NONE;
    }
    this.i32 = i32;
    this.u16 = new Uint16Array(buffer);
    this.f64 = new Float64Array(buffer);
    this.partitions = partitions;
  }
}
