/**
 * boxed_heap: the baseline merge heap, written the way most JavaScript merges are written —
 * a generic binary heap of `{source, key}` objects ordered by a comparator function.
 *
 * Owns: nothing but the baseline; it exists so the benchmark can show what unboxing buys.
 * Not for the hot path: every advance allocates one entry object and every comparison is an
 * indirect call. Exhausted sources are removed from the heap (pop), so it never holds Infinity.
 *
 * Invariants: entries.length <= capacity; entries[i] is not ordered after its children under
 * `compareEntries` (key, then source).
 */

import { assert } from "../../src/stdx/assert.ts";
import type { MergeHeap } from "../../src/merge/mod.ts";

type Entry = { readonly source: number; readonly key: number };

function compareEntries(a: Entry, b: Entry): number {
  // Keys are safe integers and never Infinity inside the heap, so the difference is exact.
  return a.key - b.key || a.source - b.source;
}

/** A binary heap of `{source, key}` objects with a comparator: the unoptimised baseline. */
export class BoxedHeap implements MergeHeap {
  readonly name = "boxed_heap";
  private readonly capacity: number;
  private readonly compare: (a: Entry, b: Entry) => number = compareEntries;
  private entries: Entry[] = [];

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "boxed_heap: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "boxed_heap: count exceeds capacity");
    assert(count <= keys.length, "boxed_heap: count exceeds keys.length");
    this.entries = [];
    for (let source = 0; source < count; source++) {
      const key = keys[source];
      if (key !== Infinity) this.push({ source, key });
    }
  }

  /** Source whose key is smallest. */
  topSource(): number {
    return this.entries[0].source;
  }

  /** Smallest key, Infinity when empty. */
  topKey(): number {
    return this.entries.length === 0 ? Infinity : this.entries[0].key;
  }

  /** The top source's next key is `key` (Infinity = exhausted). */
  advance(key: number): void {
    assert(this.entries.length > 0, "boxed_heap: advance on an empty heap");
    const top = this.entries[0];
    assert(key > top.key, "boxed_heap: source keys must strictly increase");
    if (key === Infinity) {
      const last = this.entries.pop()!;
      if (this.entries.length > 0) {
        this.entries[0] = last;
        this.siftDown(0);
      }
    } else {
      this.entries[0] = { source: top.source, key };
      this.siftDown(0);
    }
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.entries.length === 0;
  }

  private push(entry: Entry): void {
    const entries = this.entries;
    entries.push(entry);
    let index = entries.length - 1;
    while (index > 0) {
      const parent = (index - 1) >> 1;
      if (this.compare(entries[index], entries[parent]) >= 0) break;
      [entries[index], entries[parent]] = [entries[parent], entries[index]];
      index = parent;
    }
  }

  private siftDown(start: number): void {
    const entries = this.entries;
    const length = entries.length;
    let index = start;
    for (;;) {
      const left = 2 * index + 1;
      const right = left + 1;
      let smallest = index;
      if (left < length && this.compare(entries[left], entries[smallest]) < 0) smallest = left;
      if (right < length && this.compare(entries[right], entries[smallest]) < 0) smallest = right;
      if (smallest === index) return;
      [entries[index], entries[smallest]] = [entries[smallest], entries[index]];
      index = smallest;
    }
  }
}
