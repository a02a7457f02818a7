/**
 * linear_min: the k-way merge as a plain minimum scan over one Float64Array.
 *
 * Owns: `keys[s]`, the current key of source s (Infinity = exhausted), and the cached minimum
 * (`top`, `topKeyCached`) so `topSource`/`topKey` are field reads.
 *
 * `advance` writes the new key and rescans all k slots: O(k) per key, but a branch-predictable,
 * sequential, dependency-free loop over contiguous memory — the fastest choice while k is small.
 * Exhausted sources stay in place with key Infinity.
 *
 * Invariants: count <= capacity; `top` is the lowest index holding the minimum of keys[0..count)
 * (strict `<` in the scan keeps the lowest index on ties); count = 0 reads as empty (top key Infinity).
 */

import { assert } from "../../src/stdx/assert.ts";
import type { MergeHeap } from "../../src/merge/mod.ts";

/** A linear minimum scan over `keys: Float64Array`, with the minimum cached between advances. */
export class LinearMin implements MergeHeap {
  readonly name = "linear_min";
  private readonly capacity: number;
  private readonly keys: Float64Array;
  private count = 0;
  private top = 0;
  private topKeyCached = Infinity;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "linear_min: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    this.keys = new Float64Array(Math.max(capacity, 1));
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "linear_min: count exceeds capacity");
    assert(count <= keys.length, "linear_min: count exceeds keys.length");
    this.count = count;
    this.keys.set(keys.subarray(0, count));
    this.scan();
  }

  /** Source whose key is smallest. */
  topSource(): number {
    return this.top;
  }

  /** Smallest key, Infinity when every source is exhausted. */
  topKey(): number {
    return this.topKeyCached;
  }

  /** The top source's next key is `key` (Infinity = exhausted). */
  advance(key: number): void {
    assert(key > this.topKeyCached, "linear_min: advance needs a live top and a larger key");
    this.keys[this.top] = key;
    this.scan();
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.topKeyCached === Infinity;
  }

  private scan(): void {
    const keys = this.keys;
    const count = this.count;
    let best = 0;
    let bestKey = count === 0 ? Infinity : keys[0];
    for (let source = 1; source < count; source++) {
      const key = keys[source];
      if (key < bestKey) {
        bestKey = key;
        best = source;
      }
    }
    this.top = best;
    this.topKeyCached = bestKey;
  }
}
