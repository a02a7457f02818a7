/**
 * BlockPool: the one shared pool of index blocks, each of INDEX_BLOCK_ENTRIES entries.
 * Partition indexes take blocks from it and give them back, so index memory follows the live
 * messages of each partition instead of being sized for the worst case per partition.
 *
 *   entries  [ block 0: 1024 × (u32 offset, u32 seq delta) | block 1: … | … ]
 *   count    [ entries written to block 0 | … ]
 *   next     [ link of block 0 | link of block 1 | … ]   free list, or a partition's chain
 *   firstSeq [ seq of entry 0 of block 0 | … ]           base of the seq deltas
 *
 * An entry is two u32 words: the record's ring offset in RECORD_ALIGN_BYTES units, and its seq
 * minus the block's firstSeq. Keeping the seq in the index lets a merge order its sources and a
 * cursor binary-search a block without touching the ring: only records that are delivered are
 * read. A block whose next seq delta would not fit a u32 is closed early (see ENTRY_SEQ_DELTA_MAX).
 *
 * The arrays are allocated once at the limit; pages no block has touched cost no resident
 * memory, and the free list hands back the most recently freed block first so the touched set
 * stays small. Invariant: blocksUsed + blocksFree === blocksMax; a block is either on the free
 * list or in exactly one partition chain (the partition index owns that accounting).
 */
import { INDEX_BLOCK_ENTRIES, POOL_BLOCKS_MIN } from "../constants.ts";
import { assert } from "../stdx/assert.ts";

/** u32 words per index entry: ring offset, seq delta. */
export const ENTRY_WORDS = 2;
/** Largest seq delta an entry holds. */
export const ENTRY_SEQ_DELTA_MAX = 0xffffffff;

/** No block: end of a chain, or the pool is exhausted. */
export const BLOCK_NONE = -1;

/** A fixed pool of index blocks with a free list. */
export class BlockPool {
  /** Entry words of every block; entry e of block b is at word (b * INDEX_BLOCK_ENTRIES + e) * ENTRY_WORDS. */
  readonly entries: Uint32Array;
  /** Entries written to each block. */
  readonly count: Int32Array;
  /** Next block in the free list or in the owning partition's chain; BLOCK_NONE ends it. */
  readonly next: Int32Array;
  /** Seq of the first entry written to each block. */
  readonly firstSeq: Float64Array;
  private freeHead: number;
  private used = 0;
  /** Blocks ever handed out (the touched prefix); beyond it blocks are fresh pages. */
  private touched = 0;

  constructor(readonly blocksMax: number) {
    assert(
      Number.isInteger(blocksMax) && blocksMax >= POOL_BLOCKS_MIN,
      "BlockPool: blocksMax >= POOL_BLOCKS_MIN",
    );
    this.entries = new Uint32Array(blocksMax * INDEX_BLOCK_ENTRIES * ENTRY_WORDS);
    this.count = new Int32Array(blocksMax);
    this.next = new Int32Array(blocksMax).fill(BLOCK_NONE);
    this.firstSeq = new Float64Array(blocksMax);
    this.freeHead = BLOCK_NONE;
  }

  /** Blocks currently owned by partition indexes. */
  get blocksUsed(): number {
    return this.used;
  }

  /** Blocks available to acquire. */
  get blocksFree(): number {
    return this.blocksMax - this.used;
  }

  /** Takes a block, or returns BLOCK_NONE when the pool is exhausted. Its link is BLOCK_NONE. */
  acquire(): number {
    let block = this.freeHead;
    if (block !== BLOCK_NONE) {
      this.freeHead = this.next[block];
    } else if (this.touched < this.blocksMax) {
      block = this.touched++;
    } else {
      return BLOCK_NONE;
    }
    this.next[block] = BLOCK_NONE;
    this.count[block] = 0;
    this.used++;
    return block;
  }

  /** Gives `block` back to the pool. */
  release(block: number): void {
    assert(block >= 0 && block < this.touched, "BlockPool.release: block was handed out");
    assert(this.used > 0, "BlockPool.release: a block is in use");
    this.next[block] = this.freeHead;
    this.freeHead = block;
    this.used--;
  }

  /** Bytes of memory behind the blocks in use (entries plus per-block links and seqs). */
  bytesUsed(): number {
    const perBlock =
      INDEX_BLOCK_ENTRIES * ENTRY_WORDS * Uint32Array.BYTES_PER_ELEMENT +
      2 * Int32Array.BYTES_PER_ELEMENT +
      Float64Array.BYTES_PER_ELEMENT;
    return this.used * perBlock;
  }
}
