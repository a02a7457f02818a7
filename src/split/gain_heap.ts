/**
 * GainHeap: a binary max-heap of the adaptive planner's open regions, keyed by the waste the best
 * cut inside the region would save. Parallel typed arrays (gain, region, cut node), fixed capacity;
 * ties go to the lower region id so a plan never depends on insertion order.
 * Invariant: gain[parent(i)] >= gain[i] (ties: region[parent(i)] < region[i]).
 */
import { assert } from "../stdx/assert.ts";

/** Max-heap of (gain, region, cut) triples. */
export class GainHeap {
  private readonly gains: Float64Array;
  private readonly regions: Int32Array;
  private readonly cuts: Int32Array;
  /** Entries in the heap. */
  size = 0;

  constructor(capacity: number) {
    this.gains = new Float64Array(capacity);
    this.regions = new Int32Array(capacity);
    this.cuts = new Int32Array(capacity);
  }

  /** Adds an entry. */
  push(gain: number, region: number, cut: number): void {
    assert(this.size < this.gains.length, "gain heap capacity is the node count");
    let at = this.size++;
    while (at > 0) {
      const up = (at - 1) >> 1;
      if (!before(gain, region, this.gains[up], this.regions[up])) break;
      this.move(up, at);
      at = up;
    }
    this.set(at, gain, region, cut);
  }

  /** The largest gain. */
  topGain(): number {
    return this.gains[0];
  }

  /** The region of the largest gain. */
  topRegion(): number {
    return this.regions[0];
  }

  /** The cut node of the largest gain. */
  topCut(): number {
    return this.cuts[0];
  }

  /** Removes the top entry. */
  pop(): void {
    assert(this.size > 0, "pop from an empty gain heap");
    const last = --this.size;
    if (last === 0) return;
    const gain = this.gains[last];
    const region = this.regions[last];
    const cut = this.cuts[last];
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= last) break;
      if (
        child + 1 < last &&
        before(
          this.gains[child + 1],
          this.regions[child + 1],
          this.gains[child],
          this.regions[child],
        )
      )
        child++;
      if (!before(this.gains[child], this.regions[child], gain, region)) break;
      this.move(child, at);
      at = child;
    }
    this.set(at, gain, region, cut);
  }

  private move(from: number, to: number): void {
    this.set(to, this.gains[from], this.regions[from], this.cuts[from]);
  }

  private set(at: number, gain: number, region: number, cut: number): void {
    this.gains[at] = gain;
    this.regions[at] = region;
    this.cuts[at] = cut;
  }
}

/** True when (gain, region) orders before (otherGain, otherRegion). */
function before(gain: number, region: number, otherGain: number, otherRegion: number): boolean {
  return gain > otherGain || (gain === otherGain && region < otherRegion);
}
