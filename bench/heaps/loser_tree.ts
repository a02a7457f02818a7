/**
 * loser_tree: a tournament tree of losers over typed arrays for the k-way merge.
 *
 * Owns: `keys[s]`, the current key of source s (Infinity = exhausted), and `losers[node]` for the
 * k - 1 internal nodes of a complete binary tree whose k leaves are sources (leaf of s = k + s):
 *
 *                 winner (held apart)
 *                    node 1
 *                 /          \
 *            node 2          node 3          node n stores the source that LOST the match at n;
 *           /     \         /     \          the winner went up to the parent.
 *      leaf 4   leaf 5   leaf 6  leaf 7      (k = 4: leaf k + s is source s)
 *
 * `advance` replays only the path from the winner's leaf to the root: log2(k) comparisons, one per
 * level, always exactly that many (a heap's sift-down may stop early but does two per level).
 * Exhausted sources stay in the tree with key Infinity: nothing is ever removed.
 *
 * Invariants: count <= capacity; for every internal node the stored loser is ordered after the
 * winner of that subtree under (key, source); `winner` is the minimum over all sources.
 */

import { assert } from "../../src/stdx/assert.ts";
import type { MergeHeap } from "../../src/merge/mod.ts";

/** A loser tree (tournament tree) over `keys: Float64Array` and `losers: Int32Array`. */
export class LoserTree implements MergeHeap {
  readonly name = "loser_tree";
  private readonly capacity: number;
  private readonly keys: Float64Array;
  private readonly losers: Int32Array;
  /** Scratch for init: winners[node] of each internal node's subtree. */
  private readonly winners: Int32Array;
  private count = 0;
  private winner = 0;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "loser_tree: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    // keys[0] = Infinity stands for "no source" when count is 0, so topKey needs no branch.
    this.keys = new Float64Array(Math.max(capacity, 1));
    this.losers = new Int32Array(Math.max(capacity, 1));
    this.winners = new Int32Array(Math.max(capacity, 1));
    this.keys[0] = Infinity;
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "loser_tree: count exceeds capacity");
    assert(count <= keys.length, "loser_tree: count exceeds keys.length");
    this.count = count;
    this.winner = 0;
    if (count === 0) {
      this.keys[0] = Infinity;
      return;
    }
    this.keys.set(keys.subarray(0, count));
    const own = this.keys;
    // Play every match bottom-up once: children of node n are 2n and 2n + 1; a child >= count
    // is the leaf of source child - count, otherwise the winner recorded for that child.
    for (let node = count - 1; node >= 1; node--) {
      const left = 2 * node;
      const right = left + 1;
      const a = left >= count ? left - count : this.winners[left];
      const b = right >= count ? right - count : this.winners[right];
      const keyA = own[a];
      const keyB = own[b];
      const aWins = keyA < keyB || (keyA === keyB && a < b);
      this.winners[node] = aWins ? a : b;
      this.losers[node] = aWins ? b : a;
    }
    this.winner = count === 1 ? 0 : this.winners[1];
  }

  /** Source whose key is smallest. */
  topSource(): number {
    return this.winner;
  }

  /** Smallest key, Infinity when every source is exhausted. */
  topKey(): number {
    return this.keys[this.winner];
  }

  /** The winner's next key is `key` (Infinity = exhausted; the source stays as a sentinel). */
  advance(key: number): void {
    const keys = this.keys;
    const losers = this.losers;
    let source = this.winner;
    assert(
      this.count > 0 && key > keys[source],
      "loser_tree: advance needs a live top and a larger key",
    );
    keys[source] = key;
    let sourceKey = key;
    for (let node = (source + this.count) >> 1; node >= 1; node >>= 1) {
      const loser = losers[node];
      const loserKey = keys[loser];
      if (loserKey < sourceKey || (loserKey === sourceKey && loser < source)) {
        losers[node] = source;
        source = loser;
        sourceKey = loserKey;
      }
    }
    this.winner = source;
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.keys[this.winner] === Infinity;
  }
}
