/**
 * tip/heap: the k-way merge structures the tip reader uses to merge per-partition indexes.
 *
 * Public surface: the MergeHeap interface, every implementation, the MERGE_HEAPS list (what the
 * contract tests and the benchmark iterate over) and createMergeHeap, the default choice.
 */

import { assert } from "../../stdx/assert.ts";
import { BinaryHeap } from "./binary_heap.ts";
import { BoxedHeap } from "./boxed_heap.ts";
import { BranchlessHeap } from "./branchless_heap.ts";
import { CalendarQueue } from "./calendar_queue.ts";
import { KeyedLoserTree } from "./keyed_loser_tree.ts";
import { LinearMin } from "./linear_min.ts";
import { LoserTree } from "./loser_tree.ts";
import type { MergeHeap, MergeHeapFactory } from "./merge_heap.ts";
import { QuaternaryHeap } from "./quaternary_heap.ts";

export type { MergeHeap, MergeHeapFactory } from "./merge_heap.ts";
export { BinaryHeap } from "./binary_heap.ts";
export { BoxedHeap } from "./boxed_heap.ts";
export { BranchlessHeap } from "./branchless_heap.ts";
export { CalendarQueue } from "./calendar_queue.ts";
export { KeyedLoserTree } from "./keyed_loser_tree.ts";
export { LinearMin } from "./linear_min.ts";
export { LoserTree } from "./loser_tree.ts";
export { QuaternaryHeap } from "./quaternary_heap.ts";

/** Every MergeHeap implementation by name, baseline first. */
export const MERGE_HEAPS: readonly { readonly name: string; readonly create: MergeHeapFactory }[] =
  [
    { name: "boxed_heap", create: (capacity) => new BoxedHeap(capacity) },
    { name: "binary_heap", create: (capacity) => new BinaryHeap(capacity) },
    { name: "quaternary_heap", create: (capacity) => new QuaternaryHeap(capacity) },
    { name: "branchless_heap", create: (capacity) => new BranchlessHeap(capacity) },
    { name: "loser_tree", create: (capacity) => new LoserTree(capacity) },
    { name: "keyed_loser_tree", create: (capacity) => new KeyedLoserTree(capacity) },
    { name: "linear_min", create: (capacity) => new LinearMin(capacity) },
    { name: "calendar_queue", create: (capacity) => new CalendarQueue(capacity) },
  ];

/** How createMergeHeap picks an implementation. */
export type MergeHeapOptions = {
  /** Force one implementation by name (one of MERGE_HEAPS) instead of the measured default. */
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
    const entry = MERGE_HEAPS.find((candidate) => candidate.name === options.name);
    assert(entry !== undefined, "createMergeHeap: unknown implementation name");
    return entry.create(capacity);
  }
  return new KeyedLoserTree(capacity);
}
