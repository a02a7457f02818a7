/**
 * merge_heap: the one interface every k-way merge structure implements (tip, StoreReader).
 *
 * Owns: the contract only (no implementation lives here).
 * A merge runs over sources 0..k-1; each source yields strictly increasing float64 keys (message
 * seqs, safe integers). The structure tracks each source's current key and answers "which source
 * holds the smallest key". It never reads the sources itself: the caller pulls the next key and
 * hands it over with `advance`, so the structure does no I/O and allocates nothing per key.
 *
 * Invariants every implementation keeps:
 * - order is (key, source) lexicographic: on equal keys the lower source index comes first, so all
 *   implementations produce the identical sequence;
 * - Infinity marks an exhausted source; `empty()` holds exactly when every source is exhausted;
 * - `count <= capacity`, fixed at construction, so no allocation after the constructor.
 */

/** A k-way merge structure over sources 0..k-1 keyed by float64 keys. Infinity = exhausted. */
export interface MergeHeap {
  readonly name: string;
  /** Starts a merge of `count` sources whose first keys are keys[0..count) (Infinity = empty source). count <= capacity. */
  init(keys: Float64Array, count: number): void;
  /** Source whose key is smallest (ties: lower source index first). Undefined behaviour if empty(). */
  topSource(): number;
  /** Smallest key, Infinity when every source is exhausted. */
  topKey(): number;
  /** The top source moved on: its next key is `key` (Infinity = that source is exhausted). */
  advance(key: number): void;
  /** True when every source is exhausted. */
  empty(): boolean;
}

/** Builds a MergeHeap able to merge up to `capacity` sources. */
export type MergeHeapFactory = (capacity: number) => MergeHeap;
