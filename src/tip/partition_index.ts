/**
 * PartitionIndexes: for every partition, where its live messages sit in the ring, as a chain of
 * pool blocks of entries (ring offset, seq delta; see block_pool.ts). Appends go to the tail
 * block of the chain; evictions consume the head block from the front; a block goes back to the
 * pool the moment its last entry is evicted. Struct of arrays indexed by partition id: no object
 * per partition, so 100,000 partitions cost a few typed arrays.
 *
 * A new tail block's size class follows the partition's live entries (classForLive): a cold
 * partition holds 16-entry blocks, a busy one 1,024-entry blocks, and a partition that heats up
 * grows by chaining larger blocks (nothing is copied; its small blocks leave as the ring evicts).
 *
 *   partition p:  headBlock ─next─▶ block ─next─▶ tailBlock
 *                 [·····|xxxxxxx]   [xxxxxxxxxx]   [xxxxx|      ]
 *                  ▲headEntry                             ▲pool.count[tailBlock]
 *
 * Invariants per partition: live === entries from (headBlock, headEntry) to the end of
 * tailBlock; live === 0 ⇔ headBlock === BLOCK_NONE ⇔ tailBlock === BLOCK_NONE; entries are in
 * seq order; the sum of live over partitions equals the ring's record count.
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

/** The indexes of all partitions over one shared block pool. */
export class PartitionIndexes {
  headBlock: Int32Array = new Int32Array(PARTITIONS_INITIAL).fill(BLOCK_NONE);
  headEntry: Int32Array = new Int32Array(PARTITIONS_INITIAL);
  tailBlock: Int32Array = new Int32Array(PARTITIONS_INITIAL).fill(BLOCK_NONE);
  live: Float64Array = new Float64Array(PARTITIONS_INITIAL);
  private entriesLive = 0;

  constructor(readonly pool: BlockPool) {}

  /** Partitions with room in these arrays (ids below it are valid). */
  get partitionCapacity(): number {
    return this.live.length;
  }

  /** Live index entries over all partitions (= messages in the ring). */
  get entriesLiveCount(): number {
    return this.entriesLive;
  }

  /** True when appending seq `seq` to partition `p` needs a block the pool must supply. */
  needsBlock(p: number, seq: number): boolean {
    if (p >= this.live.length) return true;
    const tail = this.tailBlock[p];
    return (
      tail === BLOCK_NONE ||
      this.pool.count[tail] === this.pool.capacityOf(tail) ||
      seq - this.pool.firstSeq[tail] > ENTRY_SEQ_DELTA_MAX
    );
  }

  /**
   * Appends the entry for message `seq` of partition `p` at ring offset `offsetUnits`.
   * Returns false, changing nothing, when a new block is needed and the pool is exhausted.
   */
  push(p: number, offsetUnits: number, seq: number): boolean {
    const pool = this.pool;
    if (this.needsBlock(p, seq)) {
      if (p >= this.live.length) this.grow(p);
      const block = pool.acquire(classForLive(this.live[p]));
      if (block === BLOCK_NONE) return false;
      pool.firstSeq[block] = seq;
      const tail = this.tailBlock[p];
      if (tail === BLOCK_NONE) {
        this.headBlock[p] = block;
        this.headEntry[p] = 0;
      } else {
        pool.next[tail] = block;
      }
      this.tailBlock[p] = block;
    }
    const tail = this.tailBlock[p];
    const word = (tail * BLOCK_UNIT_ENTRIES + pool.count[tail]++) * ENTRY_WORDS;
    pool.entries[word] = offsetUnits;
    pool.entries[word + 1] = seq - pool.firstSeq[tail];
    this.live[p]++;
    this.entriesLive++;
    return true;
  }

  /** Drops the oldest entry of partition `p` (its message left the ring); frees emptied blocks. */
  dropOldest(p: number): void {
    assert(p < this.live.length && this.live[p] > 0, "dropOldest: partition has live entries");
    this.live[p]--;
    this.entriesLive--;
    const head = this.headBlock[p];
    const entry = ++this.headEntry[p];
    if (entry < this.pool.count[head]) return;
    const next = this.pool.next[head];
    this.pool.release(head);
    this.headBlock[p] = next;
    this.headEntry[p] = 0;
    if (next === BLOCK_NONE) {
      assert(this.live[p] === 0, "dropOldest: a partition with live entries keeps a block");
      this.tailBlock[p] = BLOCK_NONE;
    }
  }

  private grow(p: number): void {
    assert(p < PARTITIONS_MAX, "PartitionIndexes: partition id below PARTITIONS_MAX");
    let length = this.live.length;
    while (length <= p) length *= 2;
    this.headBlock = growInt32(this.headBlock, length, BLOCK_NONE);
    this.headEntry = growInt32(this.headEntry, length, 0);
    this.tailBlock = growInt32(this.tailBlock, length, BLOCK_NONE);
    const live = new Float64Array(length);
    live.set(this.live);
    this.live = live;
  }
}

function growInt32(array: Int32Array, length: number, fill: number): Int32Array {
  const grown = new Int32Array(length).fill(fill);
  grown.set(array);
  return grown;
}
