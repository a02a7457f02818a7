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
 * One record of PARTITION_FIELDS f64 per partition (a cache line): an append or an eviction at
 * 100,000 partitions reads one line of partition state instead of one per array, and the tail
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

/** Fields of a partition's record (f64 words); the record is one 64-byte line. */
const HEAD_BLOCK = 0;
const HEAD_ENTRY = 1;
/** Entries of the head block, cached once the head is not the tail (the head block is closed). */
const HEAD_END = 2;
const TAIL_BLOCK = 3;
const TAIL_COUNT = 4;
const TAIL_CAPACITY = 5;
/** Seq base of the tail block (its firstSeq). */
const TAIL_BASE = 6;
const LIVE = 7;
/** f64 words per partition record. */
export const PARTITION_FIELDS = 8;

/** The indexes of all partitions over one shared block pool. */
export class PartitionIndexes {
  private state: Float64Array = newState(PARTITIONS_INITIAL);
  private entriesLive = 0;

  constructor(readonly pool: BlockPool) {}

  /** Partitions with room in these arrays (ids below it are valid). */
  get partitionCapacity(): number {
    return this.state.length / PARTITION_FIELDS;
  }

  /** Live index entries over all partitions (= messages in the ring). */
  get entriesLiveCount(): number {
    return this.entriesLive;
  }

  /** Live entries of partition `p` (0 for ids never indexed). */
  liveOf(p: number): number {
    const at = p * PARTITION_FIELDS;
    return at < this.state.length ? this.state[at + LIVE] : 0;
  }

  /** First block of partition `p`'s chain (BLOCK_NONE when it holds nothing). */
  headBlockOf(p: number): number {
    const at = p * PARTITION_FIELDS;
    return at < this.state.length ? this.state[at + HEAD_BLOCK] : BLOCK_NONE;
  }

  /** Entry of the head block where partition `p`'s live entries start. */
  headEntryOf(p: number): number {
    return this.state[p * PARTITION_FIELDS + HEAD_ENTRY];
  }

  /** Last block of partition `p`'s chain (BLOCK_NONE when it holds nothing). */
  tailBlockOf(p: number): number {
    const at = p * PARTITION_FIELDS;
    return at < this.state.length ? this.state[at + TAIL_BLOCK] : BLOCK_NONE;
  }

  /** Entries written to `block`, a block of partition `p`'s chain. */
  countOf(p: number, block: number): number {
    const at = p * PARTITION_FIELDS;
    return block === this.state[at + TAIL_BLOCK]
      ? this.state[at + TAIL_COUNT]
      : this.pool.count[block];
  }

  /** True when appending seq `seq` to partition `p` needs a block the pool must supply. */
  needsBlock(p: number, seq: number): boolean {
    const at = p * PARTITION_FIELDS;
    const state = this.state;
    if (at >= state.length) return true;
    return (
      state[at + TAIL_COUNT] === state[at + TAIL_CAPACITY] ||
      seq - state[at + TAIL_BASE] > ENTRY_SEQ_DELTA_MAX
    );
  }

  /**
   * Appends the entry for message `seq` of partition `p` at ring offset `offsetUnits`.
   * Returns false, changing nothing, when a new block is needed and the pool is exhausted.
   */
  push(p: number, offsetUnits: number, seq: number): boolean {
    if (this.needsBlock(p, seq) && !this.addBlock(p, seq)) return false;
    const state = this.state;
    const at = p * PARTITION_FIELDS;
    const tail = state[at + TAIL_BLOCK];
    const count = state[at + TAIL_COUNT];
    const word = (tail * BLOCK_UNIT_ENTRIES + count) * ENTRY_WORDS;
    const entries = this.pool.entries;
    entries[word] = offsetUnits;
    entries[word + 1] = seq - state[at + TAIL_BASE];
    state[at + TAIL_COUNT] = count + 1;
    state[at + LIVE]++;
    this.entriesLive++;
    return true;
  }

  /** Drops the oldest entry of partition `p` (its message left the ring); frees emptied blocks. */
  dropOldest(p: number): void {
    const state = this.state;
    const at = p * PARTITION_FIELDS;
    assert(at < state.length && state[at + LIVE] > 0, "dropOldest: partition has live entries");
    state[at + LIVE]--;
    this.entriesLive--;
    const head = state[at + HEAD_BLOCK];
    const entry = ++state[at + HEAD_ENTRY];
    const end = head === state[at + TAIL_BLOCK] ? state[at + TAIL_COUNT] : state[at + HEAD_END];
    if (entry < end) return;
    const pool = this.pool;
    const next = pool.next[head];
    pool.release(head);
    state[at + HEAD_BLOCK] = next;
    state[at + HEAD_ENTRY] = 0;
    if (next === BLOCK_NONE) {
      assert(state[at + LIVE] === 0, "dropOldest: a partition with live entries keeps a block");
      this.clearTail(at);
    } else {
      state[at + HEAD_END] = pool.count[next];
    }
  }

  /** Chains a new tail block to partition `p` for seq `seq`; false when the pool has none. */
  private addBlock(p: number, seq: number): boolean {
    const at = p * PARTITION_FIELDS;
    if (at >= this.state.length) this.grow(p);
    const state = this.state;
    const pool = this.pool;
    const block = pool.acquire(classForLive(state[at + LIVE]));
    if (block === BLOCK_NONE) return false;
    pool.firstSeq[block] = seq;
    const tail = state[at + TAIL_BLOCK];
    if (tail === BLOCK_NONE) {
      state[at + HEAD_BLOCK] = block;
      state[at + HEAD_ENTRY] = 0;
    } else {
      // The old tail is closed: its count is final.
      pool.next[tail] = block;
      pool.count[tail] = state[at + TAIL_COUNT];
      if (tail === state[at + HEAD_BLOCK]) state[at + HEAD_END] = state[at + TAIL_COUNT];
    }
    state[at + TAIL_BLOCK] = block;
    state[at + TAIL_COUNT] = 0;
    state[at + TAIL_CAPACITY] = pool.capacityOf(block);
    state[at + TAIL_BASE] = seq;
    return true;
  }

  private clearTail(at: number): void {
    const state = this.state;
    state[at + TAIL_BLOCK] = BLOCK_NONE;
    state[at + TAIL_COUNT] = 0;
    state[at + TAIL_CAPACITY] = 0;
  }

  private grow(p: number): void {
    assert(p < PARTITIONS_MAX, "PartitionIndexes: partition id below PARTITIONS_MAX");
    let length = this.partitionCapacity;
    while (length <= p) length *= 2;
    const state = newState(length);
    state.set(this.state);
    this.state = state;
  }
}

/** Records for `partitions` empty partitions: no blocks, a full (absent) tail. */
function newState(partitions: number): Float64Array {
  const state = new Float64Array(partitions * PARTITION_FIELDS);
  for (let at = 0; at < state.length; at += PARTITION_FIELDS) {
    state[at + HEAD_BLOCK] = BLOCK_NONE;
    state[at + TAIL_BLOCK] = BLOCK_NONE;
  }
  return state;
}
