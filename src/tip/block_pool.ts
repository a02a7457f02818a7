/**
 * BlockPool: the one shared pool of index blocks. Partition indexes take blocks from it and give
 * them back, so index memory follows the live messages of each partition instead of being sized
 * for the worst case per partition.
 *
 * Memory comes in pages of INDEX_BLOCK_ENTRIES (1,024) entries. A page holds one block of a size
 * class: 1 × 1,024 entries (a busy partition), or 4 × 256, 16 × 64, 64 × 16 (colder partitions,
 * so 100,000 partitions of a few live messages each do not hold 8 KiB apiece). A block's id is
 * its first unit, a unit being BLOCK_UNIT_ENTRIES (16) entries:
 *
 *   entries  [ page 0: unit 0 … unit 63 | page 1: … ]   entry e of block b: word (b·16 + e)·2
 *            [ page 0 = one 1024 block  | page 1 = 4 × 256 | page 2 = 64 × 16 | … ]
 *   per unit:  count (entries of a closed block), next (partition chain, or class free list),
 *              firstSeq (base of the seq deltas; the free list's back link while the block is
 *              free) — only a block's first unit is used
 *   per page:  class, blocks handed out of it, next page on the free page list
 *
 * An entry is two u32 words: the record's ring offset in RECORD_ALIGN_BYTES units, and its seq
 * minus the block's firstSeq. Keeping the seq in the index lets a merge order its sources and a
 * cursor binary-search a block without touching the ring: only records that are delivered are
 * read. A block whose next seq delta would not fit a u32 is closed early (see ENTRY_SEQ_DELTA_MAX).
 *
 * Reuse: a freed block goes on its class's free list (most recently freed first); when the last
 * block handed out of a page comes back, the page leaves its class (its free blocks are unlinked)
 * and goes on the page free list, where any class, 1,024 included, takes it again. A page is cut
 * into blocks lazily: each class carves at most one page at a time, block by block.
 *
 * The arrays are allocated once at the limit; pages no block has touched cost no resident
 * memory. Invariants: pagesUsed + pagesFree === pagesMax; a used page holds blocks of one class
 * only; a block is either on its class's free list, not yet carved, or in exactly one partition
 * chain (the partition index owns that accounting).
 */
import { INDEX_BLOCK_ENTRIES, POOL_BLOCKS_MIN } from "../constants.ts";
import { assert } from "../stdx/assert.ts";

/** u32 words per index entry: ring offset, seq delta. */
export const ENTRY_WORDS = 2;
/** Largest seq delta an entry holds. */
export const ENTRY_SEQ_DELTA_MAX = 0xffffffff;
/** Entries of the smallest block: block ids count in these units. */
export const BLOCK_UNIT_ENTRIES = 16;
/** Entries of a block of each size class, smallest first; the last is a whole page. */
export const CLASS_ENTRIES: readonly number[] = [16, 64, 256, INDEX_BLOCK_ENTRIES];
/**
 * A partition's next block is the largest class of at most its live entries / this: a chain of
 * a few blocks, so the half-used head and tail blocks are a small share of what it holds.
 */
export const CLASS_LIVE_DIVISOR = 4;

const UNITS_PER_PAGE = INDEX_BLOCK_ENTRIES / BLOCK_UNIT_ENTRIES;
const CLASSES = CLASS_ENTRIES.length;
assert(INDEX_BLOCK_ENTRIES <= 0xffff, "a block's count fits a u16");
assert(INDEX_BLOCK_ENTRIES % BLOCK_UNIT_ENTRIES === 0, "a page is whole units");
/** Bytes of per-unit bookkeeping: count (u16), next (i32), firstSeq (f64). */
const UNIT_META_BYTES =
  Uint16Array.BYTES_PER_ELEMENT + Int32Array.BYTES_PER_ELEMENT + Float64Array.BYTES_PER_ELEMENT;
/** Bytes a used page holds: its entries and the bookkeeping of all its units. */
const PAGE_BYTES =
  INDEX_BLOCK_ENTRIES * ENTRY_WORDS * Uint32Array.BYTES_PER_ELEMENT +
  UNITS_PER_PAGE * UNIT_META_BYTES;

/** No block (or page): end of a chain, or the pool is exhausted. */
export const BLOCK_NONE = -1;

/** The size class (index into CLASS_ENTRIES) for the next block of a partition with `live` entries. */
export function classForLive(live: number): number {
  let sizeClass = 0;
  while (sizeClass + 1 < CLASSES && CLASS_ENTRIES[sizeClass + 1] * CLASS_LIVE_DIVISOR <= live)
    sizeClass++;
  return sizeClass;
}

/** A fixed pool of index blocks in size classes, with per-class free lists over shared pages. */
export class BlockPool {
  /** Entry words of every page; entry e of block b is at word (b * BLOCK_UNIT_ENTRIES + e) * ENTRY_WORDS. */
  readonly entries: Uint32Array;
  /** Entries written to each block, once it is closed (an open tail's count is its partition's). */
  readonly count: Uint16Array;
  /** Next block in the owning partition's chain (or the class free list); BLOCK_NONE ends it. */
  readonly next: Int32Array;
  /** Seq of the first entry written to each block; while it is free, the previous free block. */
  readonly firstSeq: Float64Array;
  /** Size class of each used page. */
  private readonly pageClass: Uint8Array;
  /** Blocks handed out of each used page (a page returns when this reaches 0). */
  private readonly pageBlocksUsed: Int32Array;
  /** Next page on the free page list. */
  private readonly pageNext: Int32Array;
  private pageFreeHead = BLOCK_NONE;
  /** Pages ever handed out (the touched prefix); beyond it pages are fresh memory. */
  private pagesTouched = 0;
  private pagesInUse = 0;
  private blocksInUse = 0;
  /** Per class: head of its free list of blocks. */
  private readonly classFreeHead = new Int32Array(CLASSES).fill(BLOCK_NONE);
  /** Per class: the page it is carving (BLOCK_NONE when none) and its next uncarved unit. */
  private readonly carvePage = new Int32Array(CLASSES).fill(BLOCK_NONE);
  private readonly carveUnit = new Int32Array(CLASSES);

  /** A pool of `pagesMax` pages of INDEX_BLOCK_ENTRIES entries each. */
  constructor(readonly pagesMax: number) {
    assert(
      Number.isInteger(pagesMax) && pagesMax >= POOL_BLOCKS_MIN,
      "BlockPool: pagesMax >= POOL_BLOCKS_MIN",
    );
    const units = pagesMax * UNITS_PER_PAGE;
    this.entries = new Uint32Array(units * BLOCK_UNIT_ENTRIES * ENTRY_WORDS);
    // Not filled: a unit's fields are written when its block is handed out.
    this.count = new Uint16Array(units);
    this.next = new Int32Array(units);
    this.firstSeq = new Float64Array(units);
    this.pageClass = new Uint8Array(pagesMax);
    this.pageBlocksUsed = new Int32Array(pagesMax);
    this.pageNext = new Int32Array(pagesMax);
  }

  /** Pages holding blocks in use. */
  get pagesUsed(): number {
    return this.pagesInUse;
  }

  /** Pages not holding any block in use. */
  get pagesFree(): number {
    return this.pagesMax - this.pagesInUse;
  }

  /** Blocks currently owned by partition indexes (of every class). */
  get blocksUsed(): number {
    return this.blocksInUse;
  }

  /** Pages ever handed out: the pool's touched memory. */
  get pagesEverUsed(): number {
    return this.pagesTouched;
  }

  /** Entries block `block` holds when full. */
  capacityOf(block: number): number {
    return CLASS_ENTRIES[this.pageClass[(block / UNITS_PER_PAGE) | 0]];
  }

  /** True when acquire() would return a block (of some class). */
  canAcquire(): boolean {
    if (this.pageFreeHead !== BLOCK_NONE || this.pagesTouched < this.pagesMax) return true;
    for (let c = 0; c < CLASSES; c++)
      if (this.classFreeHead[c] !== BLOCK_NONE || this.carvePage[c] !== BLOCK_NONE) return true;
    return false;
  }

  /**
   * Takes a block of class `sizeClass`, or of another class when that one has none left and no
   * page is free; BLOCK_NONE when the pool is exhausted. Its count is 0 and its link BLOCK_NONE.
   */
  acquire(sizeClass: number): number {
    let block = this.acquireOfClass(sizeClass);
    if (block === BLOCK_NONE) {
      for (let c = sizeClass - 1; c >= 0 && block === BLOCK_NONE; c--) block = this.acquireFreed(c);
      for (let c = sizeClass + 1; c < CLASSES && block === BLOCK_NONE; c++)
        block = this.acquireFreed(c);
      if (block === BLOCK_NONE) return BLOCK_NONE;
    }
    this.next[block] = BLOCK_NONE;
    this.count[block] = 0;
    this.blocksInUse++;
    return block;
  }

  /** Gives `block` back to the pool. */
  release(block: number): void {
    const page = (block / UNITS_PER_PAGE) | 0;
    assert(page >= 0 && page < this.pagesTouched, "BlockPool.release: block was handed out");
    assert(this.pageBlocksUsed[page] > 0, "BlockPool.release: its page has blocks in use");
    this.blocksInUse--;
    const sizeClass = this.pageClass[page];
    if (--this.pageBlocksUsed[page] > 0) {
      this.pushFree(sizeClass, block);
      return;
    }
    // The page is empty: unlink its other (free) blocks and give the page to every class.
    const step = CLASS_ENTRIES[sizeClass] / BLOCK_UNIT_ENTRIES;
    const first = page * UNITS_PER_PAGE;
    let end = first + UNITS_PER_PAGE;
    if (this.carvePage[sizeClass] === page) {
      end = this.carveUnit[sizeClass];
      this.carvePage[sizeClass] = BLOCK_NONE;
    }
    for (let unit = first; unit < end; unit += step)
      if (unit !== block) this.unlinkFree(sizeClass, unit);
    this.pageNext[page] = this.pageFreeHead;
    this.pageFreeHead = page;
    this.pagesInUse--;
  }

  /** Bytes of memory behind the pages in use (entries plus per-unit bookkeeping). */
  bytesUsed(): number {
    return this.pagesInUse * PAGE_BYTES;
  }

  /** A block of exactly `sizeClass`: a freed one, one carved from its page, or a new page's. */
  private acquireOfClass(sizeClass: number): number {
    const block = this.acquireFreed(sizeClass);
    if (block !== BLOCK_NONE) return block;
    const page = this.takePage();
    if (page === BLOCK_NONE) return BLOCK_NONE;
    this.pageClass[page] = sizeClass;
    this.pageBlocksUsed[page] = 1;
    const first = page * UNITS_PER_PAGE;
    const step = CLASS_ENTRIES[sizeClass] / BLOCK_UNIT_ENTRIES;
    if (step < UNITS_PER_PAGE) {
      this.carvePage[sizeClass] = page;
      this.carveUnit[sizeClass] = first + step;
    }
    return first;
  }

  /** A block of `sizeClass` from its free list or its carving page, without taking a page. */
  private acquireFreed(sizeClass: number): number {
    let block = this.classFreeHead[sizeClass];
    if (block !== BLOCK_NONE) {
      this.unlinkFree(sizeClass, block);
    } else {
      const page = this.carvePage[sizeClass];
      if (page === BLOCK_NONE) return BLOCK_NONE;
      block = this.carveUnit[sizeClass];
      const next = block + CLASS_ENTRIES[sizeClass] / BLOCK_UNIT_ENTRIES;
      this.carveUnit[sizeClass] = next;
      if (next === (page + 1) * UNITS_PER_PAGE) this.carvePage[sizeClass] = BLOCK_NONE;
    }
    this.pageBlocksUsed[(block / UNITS_PER_PAGE) | 0]++;
    return block;
  }

  private takePage(): number {
    let page = this.pageFreeHead;
    if (page !== BLOCK_NONE) this.pageFreeHead = this.pageNext[page];
    else if (this.pagesTouched < this.pagesMax) page = this.pagesTouched++;
    else return BLOCK_NONE;
    this.pagesInUse++;
    return page;
  }

  private pushFree(sizeClass: number, block: number): void {
    const head = this.classFreeHead[sizeClass];
    this.next[block] = head;
    this.firstSeq[block] = BLOCK_NONE;
    if (head !== BLOCK_NONE) this.firstSeq[head] = block;
    this.classFreeHead[sizeClass] = block;
  }

  private unlinkFree(sizeClass: number, block: number): void {
    const prev = this.firstSeq[block];
    const next = this.next[block];
    if (prev === BLOCK_NONE) this.classFreeHead[sizeClass] = next;
    else this.next[prev] = next;
    if (next !== BLOCK_NONE) this.firstSeq[next] = prev;
  }
}
