/**
 * branchless_heap: an unboxed binary min-heap tuned for the merge's access pattern.
 *
 * Owns: `keys: Float64Array` beside `sources: Int32Array`, slot 0 the top, children of slot i at
 * 2i+1 and 2i+2 (the same shape as binary_heap), padded with Infinity past `size`.
 *
 *   slot:   0    1    2    3    4  | size ...          2*capacity+1
 *   keys: [ 3 |  8 |  5 | 12 |  9 | Inf | Inf | ... | Inf ]   every slot >= size holds Infinity,
 *                                                              so a right child always exists
 *
 * Why (it beats binary_heap from k = 64 on, loses below): in a merge the keys of k sources
 * interleave at random, so "which child is smaller" is a coin toss the CPU mispredicts half the
 * time, at every level. Here:
 * - the child is picked by arithmetic, `left + (right < left ? 1 : 0)` as a 0/1 number, with no
 *   branch (the Infinity padding removes the "is there a right child" test);
 * - the sift is bottom-up (Floyd): the hole goes down the smaller-child path to a leaf without
 *   comparing against the new key, then the key climbs back up. A source's next key usually ranks
 *   near the bottom, so the climb is short and its one exit branch is the only misprediction.
 *
 * Invariants: 0 <= size <= capacity; each slot < size is not ordered after its children under
 * (key, source); keys[i] = Infinity for every i >= size (so keys[0] = Infinity when empty).
 */

import { assert } from "../../src/stdx/assert.ts";
import type { MergeHeap } from "../../src/merge/mod.ts";

/** An unboxed binary heap with branchless child selection and bottom-up sifting. */
export class BranchlessHeap implements MergeHeap {
  readonly name = "branchless_heap";
  private readonly capacity: number;
  private readonly keys: Float64Array;
  private readonly sources: Int32Array;
  private size = 0;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "branchless_heap: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    // Children of the last live slot (capacity - 1) reach 2 * capacity; one more keeps it even.
    this.keys = new Float64Array(2 * capacity + 2).fill(Infinity);
    this.sources = new Int32Array(2 * capacity + 2);
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "branchless_heap: count exceeds capacity");
    assert(count <= keys.length, "branchless_heap: count exceeds keys.length");
    this.keys.fill(Infinity, 0, this.size + 1);
    let size = 0;
    for (let source = 0; source < count; source++) {
      const key = keys[source];
      if (key === Infinity) continue;
      this.keys[size] = key;
      this.sources[size] = source;
      size++;
    }
    this.size = size;
    for (let index = (size >> 1) - 1; index >= 0; index--) {
      this.place(index, this.keys[index], this.sources[index]);
    }
  }

  /** Source whose key is smallest. */
  topSource(): number {
    return this.sources[0];
  }

  /** Smallest key, Infinity when empty. */
  topKey(): number {
    return this.keys[0];
  }

  /** The top source's next key is `key` (Infinity = exhausted: the source leaves the heap). */
  advance(key: number): void {
    assert(this.size > 0, "branchless_heap: advance on an empty heap");
    assert(key > this.keys[0], "branchless_heap: source keys must strictly increase");
    if (key !== Infinity) {
      this.place(0, key, this.sources[0]);
      return;
    }
    const last = --this.size;
    const lastKey = this.keys[last];
    this.keys[last] = Infinity;
    if (last === 0) return;
    this.place(0, lastKey, this.sources[last]);
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.size === 0;
  }

  /** Fills the hole at `start` with (key, source): down the smaller-child path, then back up. */
  private place(start: number, key: number, source: number): void {
    const keys = this.keys;
    const sources = this.sources;
    const size = this.size;
    let hole = start;
    for (let left = 2 * hole + 1; left < size; left = 2 * hole + 1) {
      const leftKey = keys[left];
      const rightKey = keys[left + 1];
      // 1 when the right child comes first under (key, source): computed, not branched on.
      // Equal keys are rare (keys are unique across sources), so that branch is predicted right.
      let right = +(rightKey < leftKey);
      if (rightKey === leftKey) right = +(sources[left + 1] < sources[left]);
      const child = left + right;
      keys[hole] = keys[child];
      sources[hole] = sources[child];
      hole = child;
    }
    while (hole > start) {
      const parent = (hole - 1) >> 1;
      const parentKey = keys[parent];
      if (parentKey < key || (parentKey === key && sources[parent] < source)) break;
      keys[hole] = parentKey;
      sources[hole] = sources[parent];
      hole = parent;
    }
    keys[hole] = key;
    sources[hole] = source;
  }
}
