/**
 * quaternary_heap: an unboxed 4-ary min-heap of live sources for the k-way merge.
 *
 * Owns: two parallel typed arrays, `keys` beside `sources`, slot 0 the top.
 *
 *                    slot 0
 *         /       /         \        \
 *        1       2           3        4        children of slot i: 4i+1 .. 4i+4
 *     / | | \
 *    5  6 7  8 ...
 *
 * Half the depth of a binary heap: fewer levels (fewer dependent loads) for more comparisons per
 * level, the four children sitting next to each other in memory. Same replace-top / remove-on-
 * Infinity protocol as binary_heap.
 *
 * Invariants: 0 <= size <= capacity; each slot is not ordered after its children under
 * (key, source); when size = 0, keys[0] = Infinity so `topKey` needs no branch.
 */

import { assert } from "../../src/stdx/assert.ts";
import type { MergeHeap } from "../../src/merge/mod.ts";

/** An unboxed 4-ary heap: `keys: Float64Array` beside `sources: Int32Array`. */
export class QuaternaryHeap implements MergeHeap {
  readonly name = "quaternary_heap";
  private readonly capacity: number;
  private readonly keys: Float64Array;
  private readonly sources: Int32Array;
  private size = 0;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "quaternary_heap: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    this.keys = new Float64Array(Math.max(capacity, 1));
    this.sources = new Int32Array(Math.max(capacity, 1));
    this.keys[0] = Infinity;
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "quaternary_heap: count exceeds capacity");
    assert(count <= keys.length, "quaternary_heap: count exceeds keys.length");
    let size = 0;
    for (let source = 0; source < count; source++) {
      const key = keys[source];
      if (key === Infinity) continue;
      this.keys[size] = key;
      this.sources[size] = source;
      size++;
    }
    this.size = size;
    if (size === 0) this.keys[0] = Infinity;
    // Heapify: the last internal slot is the parent of the last slot, (size - 2) >> 2.
    for (let index = (size - 2) >> 2; index >= 0; index--) {
      this.siftDown(index, this.keys[index], this.sources[index]);
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
    assert(this.size > 0, "quaternary_heap: advance on an empty heap");
    assert(key > this.keys[0], "quaternary_heap: source keys must strictly increase");
    if (key !== Infinity) {
      this.siftDown(0, key, this.sources[0]);
      return;
    }
    const last = --this.size;
    if (last === 0) {
      this.keys[0] = Infinity;
      return;
    }
    this.siftDown(0, this.keys[last], this.sources[last]);
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.size === 0;
  }

  /** Places (key, source) into the hole at `start`, moving the smallest child up past it. */
  private siftDown(start: number, key: number, source: number): void {
    const keys = this.keys;
    const sources = this.sources;
    const size = this.size;
    let index = start;
    for (;;) {
      const first = 4 * index + 1;
      if (first >= size) break;
      const end = Math.min(first + 4, size);
      let child = first;
      let childKey = keys[first];
      let childSource = sources[first];
      for (let other = first + 1; other < end; other++) {
        const otherKey = keys[other];
        if (otherKey < childKey || (otherKey === childKey && sources[other] < childSource)) {
          child = other;
          childKey = otherKey;
          childSource = sources[other];
        }
      }
      if (key < childKey || (key === childKey && source < childSource)) break;
      keys[index] = childKey;
      sources[index] = childSource;
      index = child;
    }
    keys[index] = key;
    sources[index] = source;
  }
}
