/**
 * merge: the k-way merge structures production code runs, a ground-floor module (it imports only
 * stdx). The tip merges its per-partition indexes with createMergeHeap (keyed_loser_tree); the
 * store reader merges its partition lanes on a binary_heap, or a calendar_queue for dense seqs.
 *
 * Public surface: the MergeHeap interface, the three production implementations, and
 * createMergeHeap, the default choice. The variants that exist only to be measured against these
 * (boxed, quaternary, branchless, loser tree, linear min) live in bench/heaps/, whose MERGE_HEAPS
 * lists all eight for the benchmark and for the contract tests (merge_heap.test.ts).
 */

import { assert } from "../stdx/assert.ts";
import { BinaryHeap } from "./binary_heap.ts";
import { CalendarQueue } from "./calendar_queue.ts";
import { KeyedLoserTree } from "./keyed_loser_tree.ts";
import type { MergeHeap, MergeHeapFactory } from "./merge_heap.ts";

export type { MergeHeap, MergeHeapFactory } from "./merge_heap.ts";
export { BinaryHeap } from "./binary_heap.ts";
export { CalendarQueue } from "./calendar_queue.ts";
export { KeyedLoserTree } from "./keyed_loser_tree.ts";

/** The MergeHeap implementations production code creates, by name. */
export const MERGE_HEAPS_PRODUCTION: readonly {
  readonly name: string;
  readonly create: MergeHeapFactory;
}[] = [
  { name: "binary_heap", create: (capacity) => new BinaryHeap(capacity) },
  { name: "keyed_loser_tree", create: (capacity) => new KeyedLoserTree(capacity) },
  { name: "calendar_queue", create: (capacity) => new CalendarQueue(capacity) },
];

/** How createMergeHeap picks an implementation. */
export type MergeHeapOptions = {
  /** Force one implementation by name (one of MERGE_HEAPS_PRODUCTION) instead of the default. */
  readonly name?: string;
};

/**
 * The default MergeHeap for `capacity` sources: keyed_loser_tree at every k. Measured in
 * docs/benchmarks.md (merge heaps section): fastest at k = 2, 8 and 512,
 * 1-11% behind branchless_heap at k = 64, ~2x boxed_heap there; linear_min beat it clearly only
 * at k = 3 (one run), so no small-k cut-off is worth a second code path.
 */
export function createMergeHeap(capacity: number, options: MergeHeapOptions = {}): MergeHeap {
  if (options.name !== undefined) {
    const entry = MERGE_HEAPS_PRODUCTION.find((candidate) => candidate.name === options.name);
    assert(entry !== undefined, "createMergeHeap: unknown implementation name");
    return entry.create(capacity);
  }
  return new KeyedLoserTree(capacity);
}
