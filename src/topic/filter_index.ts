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
 * By first segment: how many values have an exact or subtree entry beginning with each (a
 * filter's distinct first segments, filter.ts: one count per value, not per entry), so that
 * mayMatchIn(partition) tells in one lookup that no entry can match any topic of a partition
 * (the topic table then skips the walk for the new topics there, remembering the answer per
 * partition id until `version` changes).
 *
 * Pattern entries (with `*`) live in a small trie of their own, each node with its literal
 * children and one `*` child; a topic walks it segment by segment, following the literal child
 * and the `*` child of every node reached: O(segments × nodes reached), the nodes reached being
 * bounded by the branching of `*` entries, never a scan of the filters.
 *
 * A bucket holds one value as itself and several as an array (most entries belong to one
 * filter). Not here: topic ids and per-id answers (filter_matcher.ts, topic_table.ts).
 * Invariants: a value's entries are all present from add() to remove(); a trie node exists
 * only while some entry lies at or below it. Without patterns, a parsed filter holds no entry
 * covered by another (filter.ts), so a topic matches at most one entry of a filter; patterns
 * may overlap other entries (`a/*` and `a/b/**`), so when a pattern matched, matching() drops
 * repeats: it yields each matching value exactly once.
 */
import { TOPIC_SEGMENTS_MAX } from "../constants.ts";
import { ANY_SEGMENT, type Filter } from "./filter.ts";

type Bucket<T> = T | T[];

/** A node of the pattern trie: the entries ending here and the ways on. */
interface PatternNode<T> {
  /** Values with a pattern entry of exactly this path. */
  exact: Bucket<T> | undefined;
  /** Values with a pattern entry of this path and `/**`. */
  subtree: Bucket<T> | undefined;
  /** Literal children by segment. */
  children: Map<string, PatternNode<T>>;
  /** The `*` child. */
  star: PatternNode<T> | undefined;
}

function patternNode<T>(): PatternNode<T> {
  return { exact: undefined, subtree: undefined, children: new Map(), star: undefined };
}

/** The filters of many values, indexed by their entries. */
export class FilterIndex<T extends { readonly filter: Filter }> {
  private readonly exact = new Map<string, Bucket<T>>();
  private readonly subtrees = new Map<string, Bucket<T>>();
  /** Subtree entries registered by their prefix's segment count (0 for `**`). */
  private readonly subtreesAtDepth = new Int32Array(TOPIC_SEGMENTS_MAX + 1);
  private valueCount = 0;
  /** The pattern trie and how many pattern entries it holds. */
  private readonly patterns: PatternNode<T> = patternNode();
  private patternCount = 0;
  /** Values by the first segments of their exact and subtree entries: how many hold each. */
  private readonly firstSegments = new Map<string, number>();
  /** Bumped by every add and remove: an answer of mayMatchIn holds while it is unchanged. */
  version = 0;

  /** Values registered. */
  get size(): number {
    return this.valueCount;
  }

  /**
   * False when no registered entry can match any topic of `partition` (a partition's name): no
   * `**`, no pattern, and no exact or subtree entry begins with the partition's first segment.
   * One lookup; the answer holds until `version` changes.
   */
  mayMatchIn(partition: string): boolean {
    if (this.patternCount > 0 || this.subtreesAtDepth[0] > 0) return true;
    const slash = partition.indexOf("/");
    return this.firstSegments.has(slash < 0 ? partition : partition.slice(0, slash));
  }

  /** Registers `value` under each entry of its filter. */
  add(value: T): void {
    this.version++;
    for (const first of value.filter.firstSegments()) this.countFirst(first, 1);
    for (const entry of value.filter.entries) {
      if (entry.kind === "exact") put(this.exact, entry.topic, value);
      else if (entry.kind === "pattern") {
        let node = this.patterns;
        for (const segment of entry.segments) {
          let next = segment === ANY_SEGMENT ? node.star : node.children.get(segment);
          if (next === undefined) {
            next = patternNode();
            if (segment === ANY_SEGMENT) node.star = next;
            else node.children.set(segment, next);
          }
          node = next;
        }
        if (entry.subtree) node.subtree = putIn(node.subtree, value);
        else node.exact = putIn(node.exact, value);
        this.patternCount++;
      } else {
        put(this.subtrees, entry.prefix, value);
        this.subtreesAtDepth[depthOf(entry.prefix)]++;
      }
    }
    this.valueCount++;
  }

  /** Unregisters `value` (added before). */
  remove(value: T): void {
    this.version++;
    for (const first of value.filter.firstSegments()) this.countFirst(first, -1);
    for (const entry of value.filter.entries) {
      if (entry.kind === "exact") take(this.exact, entry.topic, value);
      else if (entry.kind === "pattern") {
        this.removePattern(this.patterns, entry.segments, 0, entry.subtree, value);
        this.patternCount--;
      } else {
        take(this.subtrees, entry.prefix, value);
        this.subtreesAtDepth[depthOf(entry.prefix)]--;
      }
    }
    this.valueCount--;
  }

  private countFirst(segment: string, add: number): void {
    const count = (this.firstSegments.get(segment) ?? 0) + add;
    if (count === 0) this.firstSegments.delete(segment);
    else this.firstSegments.set(segment, count);
  }

  /** Appends to `out` every value whose filter matches topic `name`, each once. */
  matching(name: string, out: T[]): void {
    const start = out.length;
    push(this.exact.get(name), out);
    this.matchLiteralSubtrees(name, out);
    if (this.patternCount > 0 && this.matchPatterns(name, out) && out.length - start > 1) {
      // A topic may match a pattern and another entry of one filter: keep each value once.
      const seen = new Set<T>();
      let kept = start;
      for (let i = start; i < out.length; i++) {
        if (seen.has(out[i])) continue;
        seen.add(out[i]);
        out[kept++] = out[i];
      }
      out.length = kept;
    }
  }

  /** Appends the values of subtree entries without `*` that hold `name`. */
  private matchLiteralSubtrees(name: string, out: T[]): void {
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

  /** Appends the values of pattern entries matching `name`; true when it appended any. */
  private matchPatterns(name: string, out: T[]): boolean {
    const before = out.length;
    const segments = name.split("/");
    let reached: PatternNode<T>[] = [this.patterns];
    for (let depth = 0; depth <= segments.length && reached.length > 0; depth++) {
      const next: PatternNode<T>[] = [];
      for (const node of reached) {
        // A `/**` entry here holds the topic: it has at least `depth` segments.
        push(node.subtree, out);
        if (depth === segments.length) {
          push(node.exact, out);
          continue;
        }
        const literal = node.children.get(segments[depth]);
        if (literal !== undefined) next.push(literal);
        if (node.star !== undefined) next.push(node.star);
      }
      reached = next;
    }
    return out.length > before;
  }

  /** Takes `value` from the pattern entry at `segments[from..]` below `node`; prunes empties. */
  private removePattern(
    node: PatternNode<T>,
    segments: readonly string[],
    from: number,
    subtree: boolean,
    value: T,
  ): void {
    if (from === segments.length) {
      if (subtree) node.subtree = takeFrom(node.subtree, value);
      else node.exact = takeFrom(node.exact, value);
      return;
    }
    const segment = segments[from];
    const child = segment === ANY_SEGMENT ? node.star : node.children.get(segment);
    if (child === undefined) return;
    this.removePattern(child, segments, from + 1, subtree, value);
    const empty =
      child.exact === undefined &&
      child.subtree === undefined &&
      child.star === undefined &&
      child.children.size === 0;
    if (!empty) return;
    if (segment === ANY_SEGMENT) node.star = undefined;
    else node.children.delete(segment);
  }
}

function putIn<T>(bucket: Bucket<T> | undefined, value: T): Bucket<T> {
  if (bucket === undefined) return value;
  if (Array.isArray(bucket)) {
    bucket.push(value);
    return bucket;
  }
  return [bucket, value];
}

function takeFrom<T>(bucket: Bucket<T> | undefined, value: T): Bucket<T> | undefined {
  if (bucket === value) return undefined;
  if (!Array.isArray(bucket)) return bucket;
  const index = bucket.indexOf(value);
  if (index < 0) return bucket;
  bucket[index] = bucket[bucket.length - 1];
  bucket.pop();
  return bucket.length === 1 ? bucket[0] : bucket;
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
