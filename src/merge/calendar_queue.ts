/**
 * calendar_queue: a bucket queue of live sources for the k-way merge of dense integer keys.
 *
 * Owns: a window of `width` slots for the keys [base, base + width), one per key; a slot holds the
 * sources whose current key it is (a chain through `links`, ascending source), a bit per slot says
 * which slots hold any; sources whose key lies past the window wait in `far`.
 *
 *   base                                  base + width
 *    | slot 0 | … | slot (top) | … | slot w-1 |   far: sources with keys ≥ base + width
 *                    ^ every slot before it is empty
 *
 * `advance` takes the top source out of its slot and drops it into the slot of its next key: O(1),
 * against a heap's O(log k) sift, when the keys of all sources together are dense (the seqs of a
 * whole-stream read: every seq is some partition's next key, so slots are rarely empty). When the
 * window empties, it moves to the smallest far key. Sparse keys cost a scan of the slot bits (32
 * slots per step) and a pass over `far` per window: a binary heap suits them better.
 *
 * Keys are integers (message seqs). Invariants: the top slot is the first non-empty one; every
 * source in a slot has key base + slot; `size` = sources in slots + far; exhausted sources are in
 * neither.
 */

import { assert } from "../stdx/assert.ts";
import type { MergeHeap } from "./merge_heap.ts";

/** Slots of the window: twice the capacity (a partition's next seq lands within it), a power of two in [64, 65536]. */
function widthFor(capacity: number): number {
  let width = 64;
  while (width < 2 * capacity && width < 65536) width *= 2;
  return width;
}

/** A calendar (bucket) queue: `heads` per slot, `links` and `keyOf` per source, slot bits, a far list. */
export class CalendarQueue implements MergeHeap {
  readonly name = "calendar_queue";
  private readonly capacity: number;
  private readonly width: number;
  private readonly heads: Int32Array;
  private readonly links: Int32Array;
  private readonly keyOf: Float64Array;
  private readonly occupied: Uint32Array;
  private readonly far: Int32Array;
  private farCount = 0;
  private base = 0;
  private top = 0;
  private size = 0;
  private inWindow = 0;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "calendar_queue: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    this.width = widthFor(capacity);
    this.heads = new Int32Array(this.width).fill(-1);
    this.occupied = new Uint32Array(this.width >> 5);
    this.links = new Int32Array(Math.max(capacity, 1));
    this.keyOf = new Float64Array(Math.max(capacity, 1));
    this.far = new Int32Array(Math.max(capacity, 1));
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "calendar_queue: count exceeds capacity");
    assert(count <= keys.length, "calendar_queue: count exceeds keys.length");
    this.heads.fill(-1);
    this.occupied.fill(0);
    this.farCount = 0;
    this.size = 0;
    this.inWindow = 0;
    this.top = 0;
    let min = Infinity;
    for (let source = 0; source < count; source++) if (keys[source] < min) min = keys[source];
    this.base = min === Infinity ? 0 : min;
    for (let source = 0; source < count; source++) {
      const key = keys[source];
      if (key === Infinity) continue;
      this.size++;
      this.place(source, key);
    }
  }

  /** Source whose key is smallest (ties: lower source first). */
  topSource(): number {
    this.settle();
    return this.heads[this.top];
  }

  /** Smallest key, Infinity when empty. */
  topKey(): number {
    if (this.size === 0) return Infinity;
    this.settle();
    return this.base + this.top;
  }

  /** The top source's next key is `key` (Infinity = exhausted: the source leaves). */
  advance(key: number): void {
    assert(this.size > 0, "calendar_queue: advance on an empty queue");
    this.settle();
    const top = this.top;
    const source = this.heads[top];
    assert(key > this.keyOf[source], "calendar_queue: source keys must strictly increase");
    const rest = this.links[source];
    this.heads[top] = rest;
    if (rest === -1) this.occupied[top >> 5] &= ~(1 << (top & 31));
    this.inWindow--;
    if (key === Infinity) this.size--;
    else this.place(source, key);
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.size === 0;
  }

  /** Puts `source` with `key` in its slot (after lower sources of the same key), or in `far`. */
  private place(source: number, key: number): void {
    assert(Number.isInteger(key), "calendar_queue: keys must be integers");
    this.keyOf[source] = key;
    const slot = key - this.base;
    if (slot >= this.width) {
      this.far[this.farCount++] = source;
      return;
    }
    // Never before the top slot (those are done): keys only grow, and the top is the smallest.
    assert(slot >= this.top, "calendar_queue: a key below the smallest one");
    const heads = this.heads;
    const links = this.links;
    let next = heads[slot];
    if (next === -1 || source < next) {
      heads[slot] = source;
      links[source] = next;
      this.occupied[slot >> 5] |= 1 << (slot & 31);
    } else {
      let previous = next;
      next = links[previous];
      while (next !== -1 && next < source) {
        previous = next;
        next = links[previous];
      }
      links[previous] = source;
      links[source] = next;
    }
    this.inWindow++;
  }

  /** Moves `top` to the first non-empty slot, moving the window on when it has none left. */
  private settle(): void {
    if (this.heads[this.top] !== -1) return;
    if (this.inWindow === 0) this.moveWindow();
    const occupied = this.occupied;
    let word = this.top >> 5;
    let bits = occupied[word] & (-1 << (this.top & 31));
    while (bits === 0) bits = occupied[++word];
    this.top = (word << 5) + (31 - Math.clz32(bits & -bits));
  }

  /** The window starts at the smallest far key; far sources within it move into their slots. */
  private moveWindow(): void {
    assert(this.farCount > 0, "calendar_queue: no source left to move to");
    const far = this.far;
    const keyOf = this.keyOf;
    let min = Infinity;
    for (let i = 0; i < this.farCount; i++) if (keyOf[far[i]] < min) min = keyOf[far[i]];
    this.base = min;
    this.top = 0;
    const waiting = this.farCount;
    this.farCount = 0;
    for (let i = 0; i < waiting; i++) this.place(far[i], keyOf[far[i]]);
  }
}
