/**
 * FilterIndex: every registered filter's entries in one trie of topic segments, so the filters
 * that match a topic are found by walking its segments once: O(segments + matches), whatever the
 * number of filters or entries. This is what a topic the server has not seen costs to match.
 *
 * The trie is stored flat: a node is named by its path ("a/b"), and each kind of entry has one
 * map from a node's path to the values whose filter holds that entry there:
 *
 *   subtrees: ""    ─▶ [f1]           (`**`)
 *             "a"   ─▶ [f2]           (`a/**`)
 *             "a/b" ─▶ [f3, f4]       (`a/b/**`)
 *   exact:    "a/b/c" ─▶ [f5]         (`a/b/c`)
 *
 *   matching("a/b/c") looks up subtrees at "", "a", "a/b", "a/b/c" and exact at "a/b/c",
 *   skipping the depths at which no subtree entry is registered (subtreesAtDepth).
 *
 * A bucket holds one value as itself and several as an array (most entries belong to one
 * filter). Not here: topic ids and per-id answers (filter_matcher.ts, topic_table.ts).
 * Invariants: a value's entries are all present from add() to remove(); since a parsed filter
 * holds no entry covered by another (filter.ts), a topic matches at most one entry of a filter,
 * so matching() yields each matching value exactly once.
 */
import { TOPIC_SEGMENTS_MAX } from "../constants.ts";
import type { Filter } from "./filter.ts";

type Bucket<T> = T | T[];

/** The filters of many values, indexed by their entries. */
export class FilterIndex<T extends { readonly filter: Filter }> {
  private readonly exact = new Map<string, Bucket<T>>();
  private readonly subtrees = new Map<string, Bucket<T>>();
  /** Subtree entries registered by their prefix's segment count (0 for `**`). */
  private readonly subtreesAtDepth = new Int32Array(TOPIC_SEGMENTS_MAX + 1);
  private valueCount = 0;

  /** Values registered. */
  get size(): number {
    return this.valueCount;
  }

  /** Registers `value` under each entry of its filter. */
  add(value: T): void {
    for (const entry of value.filter.entries) {
      if (entry.kind === "exact") put(this.exact, entry.topic, value);
      else {
        put(this.subtrees, entry.prefix, value);
        this.subtreesAtDepth[depthOf(entry.prefix)]++;
      }
    }
    this.valueCount++;
  }

  /** Unregisters `value` (added before). */
  remove(value: T): void {
    for (const entry of value.filter.entries) {
      if (entry.kind === "exact") take(this.exact, entry.topic, value);
      else {
        take(this.subtrees, entry.prefix, value);
        this.subtreesAtDepth[depthOf(entry.prefix)]--;
      }
    }
    this.valueCount--;
  }

  /** Appends to `out` every value whose filter matches topic `name`, each once. */
  matching(name: string, out: T[]): void {
    push(this.exact.get(name), out);
    const subtrees = this.subtrees;
    if (subtrees.size === 0) return;
    const atDepth = this.subtreesAtDepth;
    if (atDepth[0] > 0) push(subtrees.get(""), out);
    let depth = 1;
    for (let slash = name.indexOf("/"); slash >= 0; slash = name.indexOf("/", slash + 1)) {
      // A prefix string is made only where some subtree entry has that many segments.
      if (atDepth[depth++] > 0) push(subtrees.get(name.slice(0, slash)), out);
    }
    if (atDepth[depth] > 0) push(subtrees.get(name), out);
  }
}

/** Segments of a subtree prefix ("" for `**`: 0). */
function depthOf(prefix: string): number {
  if (prefix === "") return 0;
  let depth = 1;
  for (let i = prefix.indexOf("/"); i >= 0; i = prefix.indexOf("/", i + 1)) depth++;
  return depth;
}

function put<T>(map: Map<string, Bucket<T>>, key: string, value: T): void {
  const bucket = map.get(key);
  if (bucket === undefined) map.set(key, value);
  else if (Array.isArray(bucket)) bucket.push(value);
  else map.set(key, [bucket, value]);
}

function take<T>(map: Map<string, Bucket<T>>, key: string, value: T): void {
  const bucket = map.get(key);
  if (bucket === value) {
    map.delete(key);
    return;
  }
  if (!Array.isArray(bucket)) return;
  const index = bucket.indexOf(value);
  if (index < 0) return;
  bucket[index] = bucket[bucket.length - 1];
  bucket.pop();
  if (bucket.length === 1) map.set(key, bucket[0]);
}

function push<T>(bucket: Bucket<T> | undefined, out: T[]): void {
  if (bucket === undefined) return;
  if (!Array.isArray(bucket)) {
    out.push(bucket);
    return;
  }
  for (let i = 0; i < bucket.length; i++) out.push(bucket[i]);
}
