/**
 * binary_heap: an unboxed binary min-heap of live sources for the k-way merge.
 *
 * Owns: two parallel typed arrays, `keys` beside `sources`, slot 0 the top.
 *
 *            slot 0
 *         /         \
 *     slot 1       slot 2          children of slot i: 2i+1, 2i+2
 *     /    \       /    \
 *    3      4     5      6
 *
 * `advance` replaces the top's key and sifts it down (a hole moves down, no swaps); a source that
 * runs out is removed: the last slot fills the hole at the top. Exhausted sources are never held.
 *
 * Invariants: 0 <= size <= capacity; each slot is not ordered after its children under
 * (key, source); when size = 0, keys[0] = Infinity so `topKey` needs no branch.
 */

import { assert } from "../stdx/assert.ts";
import type { MergeHeap } from "./merge_heap.ts";

/** An unboxed binary heap: `keys: Float64Array` beside `sources: Int32Array`. */
export class BinaryHeap implements MergeHeap {
  readonly name = "binary_heap";
  private readonly capacity: number;
  private readonly keys: Float64Array;
  private readonly sources: Int32Array;
  private size = 0;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "binary_heap: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    // One extra slot keeps keys[0] addressable (= Infinity) when capacity is 0.
    this.keys = new Float64Array(Math.max(capacity, 1));
    this.sources = new Int32Array(Math.max(capacity, 1));
    this.keys[0] = Infinity;
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "binary_heap: count exceeds capacity");
    assert(count <= keys.length, "binary_heap: count exceeds keys.length");
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
    // Floyd's heapify: O(k), sift every internal slot down, last one first.
    for (let index = (size >> 1) - 1; index >= 0; index--) {
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
    assert(this.size > 0, "binary_heap: advance on an empty heap");
    assert(key > this.keys[0], "binary_heap: source keys must strictly increase");
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

  /** Places (key, source) into the hole at `start`, moving smaller children up past it. */
  private siftDown(start: number, key: number, source: number): void {
    const keys = this.keys;
    const sources = this.sources;
    const size = this.size;
    let index = start;
    for (;;) {
      let child = 2 * index + 1;
      if (child >= size) break;
      let childKey = keys[child];
      let childSource = sources[child];
      const right = child + 1;
      if (right < size) {
        const rightKey = keys[right];
        const rightSource = sources[right];
        if (rightKey < childKey || (rightKey === childKey && rightSource < childSource)) {
          child = right;
          childKey = rightKey;
          childSource = rightSource;
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
