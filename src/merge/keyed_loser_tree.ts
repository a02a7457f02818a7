/**
 * keyed_loser_tree: a loser tree whose nodes carry the loser's key beside its source, replayed
 * without data-dependent branches. The fastest measured merge for k above a handful of sources.
 *
 * Owns: `nodeKeys[node]` beside `nodeSources[node]` for the k - 1 internal nodes (same shape as
 * loser_tree: leaf of source s is node k + s, children of n are 2n and 2n + 1), plus the winner's
 * (source, key) in two fields. It keeps no per-source state at all.
 *
 *        node:      1        2        3      ...  k-1
 *   nodeKeys:   [ 17.0 |  42.0  |  Inf  | ... ]      the key each match's loser had when it lost
 *   nodeSources:[   3  |    0   |   5   | ... ]
 *
 * Why it beats loser_tree:
 * - loser_tree reads `keys[losers[node]]` at every level, a load whose address depends on the
 *   previous one; here the key sits at the node, and the nodes on the path (leaf >> 1, >> 2, ...)
 *   are known before any match is played, so the CPU can fetch them all at once;
 * - in a merge the keys of k sources interleave at random, so "does the loser beat the climber"
 *   is a coin toss a branch mispredicts half the time. The match is played as data instead: a
 *   0/1 `swap` picks the key out of a two-slot scratch (`pairKeys[swap]`) and the source by an
 *   xor mask. Equal keys (only exhausted sources, all Infinity) take a branch that is almost
 *   never taken, so it stays predicted and off the critical path.
 *
 * Invariants: count <= capacity; for every internal node (nodeKeys, nodeSources) is ordered after
 * the winner of that subtree under (key, source); (winner, winnerKey) is the overall minimum;
 * exhausted sources stay in the tree with key Infinity.
 */

import { assert } from "../stdx/assert.ts";
import type { MergeHeap } from "./merge_heap.ts";

/** A loser tree storing each node's loser key inline: `nodeKeys: Float64Array` beside `nodeSources: Int32Array`. */
export class KeyedLoserTree implements MergeHeap {
  readonly name = "keyed_loser_tree";
  private readonly capacity: number;
  private readonly nodeKeys: Float64Array;
  private readonly nodeSources: Int32Array;
  /** Scratch for init: the winner (source, key) of each internal node's subtree. */
  private readonly winnerSources: Int32Array;
  private readonly winnerKeys: Float64Array;
  /** Two-slot scratch: a match's winning key is picked by index, `pairKeys[swap]`, not by branch. */
  private readonly pairKeys = new Float64Array(2);
  private count = 0;
  private winner = 0;
  private winnerKey = Infinity;

  constructor(capacity: number) {
    assert(
      Number.isInteger(capacity) && capacity >= 0,
      "keyed_loser_tree: capacity must be a non-negative integer",
    );
    this.capacity = capacity;
    const slots = Math.max(capacity, 1);
    this.nodeKeys = new Float64Array(slots);
    this.nodeSources = new Int32Array(slots);
    this.winnerSources = new Int32Array(slots);
    this.winnerKeys = new Float64Array(slots);
  }

  /** Starts a merge of `count` sources whose first keys are keys[0..count). */
  init(keys: Float64Array, count: number): void {
    assert(count <= this.capacity, "keyed_loser_tree: count exceeds capacity");
    assert(count <= keys.length, "keyed_loser_tree: count exceeds keys.length");
    this.count = count;
    if (count <= 1) {
      this.winner = 0;
      this.winnerKey = count === 0 ? Infinity : keys[0];
      return;
    }
    const winnerSources = this.winnerSources;
    const winnerKeys = this.winnerKeys;
    for (let node = count - 1; node >= 1; node--) {
      const left = 2 * node;
      const right = left + 1;
      const a = left >= count ? left - count : winnerSources[left];
      const keyA = left >= count ? keys[a] : winnerKeys[left];
      const b = right >= count ? right - count : winnerSources[right];
      const keyB = right >= count ? keys[b] : winnerKeys[right];
      if (keyA < keyB || (keyA === keyB && a < b)) {
        winnerSources[node] = a;
        winnerKeys[node] = keyA;
        this.nodeSources[node] = b;
        this.nodeKeys[node] = keyB;
      } else {
        winnerSources[node] = b;
        winnerKeys[node] = keyB;
        this.nodeSources[node] = a;
        this.nodeKeys[node] = keyA;
      }
    }
    this.winner = winnerSources[1];
    this.winnerKey = winnerKeys[1];
  }

  /** Source whose key is smallest. */
  topSource(): number {
    return this.winner;
  }

  /** Smallest key, Infinity when every source is exhausted. */
  topKey(): number {
    return this.winnerKey;
  }

  /** The winner's next key is `key` (Infinity = exhausted; the source stays as a sentinel). */
  advance(key: number): void {
    assert(key > this.winnerKey, "keyed_loser_tree: advance needs a live top and a larger key");
    const nodeKeys = this.nodeKeys;
    const nodeSources = this.nodeSources;
    const pairKeys = this.pairKeys;
    let source = this.winner;
    let sourceKey = key;
    for (let node = (source + this.count) >> 1; node >= 1; node >>= 1) {
      const loserKey = nodeKeys[node];
      const loser = nodeSources[node];
      // swap = 1 when the node's loser beats the climber under (key, source).
      let swap = +(loserKey < sourceKey);
      if (loserKey === sourceKey) swap = +(loser < source);
      pairKeys[0] = sourceKey;
      pairKeys[1] = loserKey;
      sourceKey = pairKeys[swap];
      nodeKeys[node] = pairKeys[swap ^ 1];
      // flip = source ^ loser when swapping, else 0: exchanges the two without a branch.
      const flip = (source ^ loser) & -swap;
      source ^= flip;
      nodeSources[node] = loser ^ flip;
    }
    this.winner = source;
    this.winnerKey = sourceKey;
  }

  /** True when every source is exhausted. */
  empty(): boolean {
    return this.winnerKey === Infinity;
  }
}
