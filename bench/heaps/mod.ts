/**
 * bench/heaps: the MergeHeap variants that exist only to be measured against the production ones
 * in src/merge/ (boxed baseline, quaternary, branchless, plain loser tree, linear min), and
 * MERGE_HEAPS, every implementation by name: what bench/heap.bench.ts compares and what the
 * contract suite (src/merge/merge_heap.test.ts) runs against, so every heap stays tested.
 *
 * Production code never imports this folder; a variant that wins a benchmark moves to src/merge/.
 */

import {
  BinaryHeap,
  CalendarQueue,
  KeyedLoserTree,
  type MergeHeapFactory,
} from "../../src/merge/mod.ts";
import { BoxedHeap } from "./boxed_heap.ts";
import { BranchlessHeap } from "./branchless_heap.ts";
import { LinearMin } from "./linear_min.ts";
import { LoserTree } from "./loser_tree.ts";
import { QuaternaryHeap } from "./quaternary_heap.ts";

export { BoxedHeap } from "./boxed_heap.ts";
export { BranchlessHeap } from "./branchless_heap.ts";
export { LinearMin } from "./linear_min.ts";
export { LoserTree } from "./loser_tree.ts";
export { QuaternaryHeap } from "./quaternary_heap.ts";

/** Every MergeHeap implementation by name, production and bench-only, baseline first. */
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
