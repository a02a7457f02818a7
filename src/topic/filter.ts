/**
 * Filters: a set of exact topics (`a/b/c`), subtrees (`a/b/**`: `a/b` and everything below;
 * `**`: everything) and patterns, entries holding the single-level wildcard `*` as whole
 * segments (`app/*` + `/orders` matches `app/eu/orders`; a pattern may end in `/**`). Parsing
 * validates and normalises: an entry covered by another is dropped, and equal filters print
 * equally. Entries may still overlap (`a/*` and `a/b/**` both match `a/b`): matching answers
 * yes or no, never a count, so a message is delivered once whatever entries it matches.
 * Invariant: an entry with no `*` segment is exact or subtree, never a pattern.
 * Pure: no interning here (see filter_matcher.ts for matching by topic id).
 */
import { FILTER_ENTRIES_MAX, PARTITION_SEGMENTS } from "../constants.ts";
import { foreignFilterAdvice } from "./foreign_syntax.ts";
import { partitionOf, validateTopic } from "./topic.ts";

const SUBTREE_SUFFIX = "/**";
const EVERYTHING = "**";
/** The single-level wildcard: exactly one whole segment. */
export const ANY_SEGMENT = "*";
/** Stands in for `*` while the rest of a pattern is validated as a topic (same length). */
const PLACEHOLDER = "_";

/** One entry of a filter. `prefix` is "" for `**`; a pattern has at least one `*` segment. */
export type FilterEntry =
  | { readonly kind: "exact"; readonly topic: string }
  | { readonly kind: "subtree"; readonly prefix: string }
  | {
      readonly kind: "pattern";
      /** Segments, some of them `*`. */
      readonly segments: readonly string[];
      /** True for a trailing `/**`: the matched topics and everything below them. */
      readonly subtree: boolean;
    };

/** The result of parsing a filter: the filter, or the reason it is invalid. */
export type FilterParse = { ok: true; filter: Filter } | { ok: false; reason: string };

/** Any entry as segments: `subtree` entries also match every topic below. */
interface Shape {
  readonly segments: readonly string[];
  readonly subtree: boolean;
}

/** A validated, normalised set of filter entries. */
export class Filter {
  /** Exact topics. */
  private readonly exact = new Set<string>();
  /** Subtree prefixes ("" for everything). */
  private readonly subtrees = new Set<string>();
  /** Partitions named by an entry (its first two segments). */
  private readonly partitions = new Set<string>();
  /** One-segment subtrees (`a/**`), which span every partition `a/…`. */
  private readonly spanning = new Set<string>();
  /** Pattern entries (with `*`). */
  private readonly patterns: Shape[] = [];
  /** The distinct first segments of the exact and subtree entries (made on first use). */
  private firsts: readonly string[] | null = null;

  private constructor(readonly entries: readonly FilterEntry[]) {
    for (const entry of entries) {
      if (entry.kind === "pattern") {
        this.patterns.push(entry);
        continue;
      }
      const text = entry.kind === "exact" ? entry.topic : entry.prefix;
      (entry.kind === "exact" ? this.exact : this.subtrees).add(text);
      if (entry.kind === "subtree" && text.indexOf("/") < 0) this.spanning.add(text);
      else this.partitions.add(partitionOf(text));
    }
  }

  /**
   * The distinct first segments of the exact and subtree entries (not `**`'s, nor patterns'):
   * a topic whose first segment is none of them matches none of those entries (filter_index.ts).
   */
  firstSegments(): readonly string[] {
    if (this.firsts !== null) return this.firsts;
    const firsts = new Set<string>();
    for (const text of [...this.exact, ...this.subtrees]) {
      const slash = text.indexOf("/");
      if (text !== "") firsts.add(slash < 0 ? text : text.slice(0, slash));
    }
    this.firsts = [...firsts];
    return this.firsts;
  }

  /** Parses filter strings such as `a/b/c`, `a/b/**`, `a/*` and `**`. */
  static parse(texts: readonly string[]): FilterParse {
    if (texts.length === 0) return { ok: false, reason: "filter has no entries" };
    if (texts.length > FILTER_ENTRIES_MAX) {
      return {
        ok: false,
        reason: `filter has ${texts.length} entries, more than the limit of ${FILTER_ENTRIES_MAX}`,
      };
    }
    const entries: FilterEntry[] = [];
    for (const text of texts) {
      const entry = parseEntry(text);
      if (typeof entry === "string") {
        // Another system's wildcard (`app/#`, `app/+/x`, `orders.*`) also gets what Aria writes.
        const advice = foreignFilterAdvice(text);
        return {
          ok: false,
          reason: `filter entry "${text}": ${entry}${advice === null ? "" : `; ${advice}`}`,
        };
      }
      entries.push(entry);
    }
    return { ok: true, filter: new Filter(normalise(entries)) };
  }

  /** Parses or throws a TypeError with the reason: for tests and trusted callers. */
  static of(...texts: string[]): Filter {
    const parsed = Filter.parse(texts);
    if (!parsed.ok) throw new TypeError(parsed.reason);
    return parsed.filter;
  }

  /** True when the topic `name` matches some entry: one set lookup per segment (+ patterns). */
  matches(name: string): boolean {
    if (this.exact.has(name) || this.subtrees.has("")) return true;
    if (this.patterns.length > 0 && this.matchesPattern(name)) return true;
    if (this.subtrees.size === 0) return false;
    for (let slash = name.indexOf("/"); slash >= 0; slash = name.indexOf("/", slash + 1)) {
      if (this.subtrees.has(name.slice(0, slash))) return true;
    }
    return this.subtrees.has(name);
  }

  /** True when the partition `partition` may hold topics that match. */
  touchesPartition(partition: string): boolean {
    if (this.partitions.has(partition) || this.spanning.has("")) return true;
    if (this.patterns.length > 0) {
      const segments = partition.split("/");
      for (const pattern of this.patterns) if (shapeTouches(pattern, segments)) return true;
    }
    if (this.spanning.size === 0) return false;
    // A subtree shorter than a partition (`a/**`) spans every partition below it.
    const slash = partition.indexOf("/");
    return this.spanning.has(slash < 0 ? partition : partition.slice(0, slash));
  }

  /** The filter in its textual form, entries sorted. */
  toStrings(): string[] {
    return this.entries.map(entryText);
  }

  toString(): string {
    return this.toStrings().join(" ");
  }

  private matchesPattern(name: string): boolean {
    const segments = name.split("/");
    for (const pattern of this.patterns) if (shapeMatches(pattern, segments)) return true;
    return false;
  }
}

/** True when every topic `inner` matches also matches `outer`. */
export function entryCovers(outer: FilterEntry, inner: FilterEntry): boolean {
  return covers(shapeOf(outer), shapeOf(inner));
}

/** True when some topic matches both `a` and `b`. */
export function entriesIntersect(a: FilterEntry, b: FilterEntry): boolean {
  const x = shapeOf(a);
  const y = shapeOf(b);
  const m = x.segments.length;
  const n = y.segments.length;
  // A common length: equal, or at least the longer one's where the shorter is a subtree.
  if (!(m === n || (m > n && y.subtree) || (n > m && x.subtree))) return false;
  for (let i = 0; i < Math.min(m, n); i++) {
    const s = x.segments[i];
    const t = y.segments[i];
    if (s !== t && s !== ANY_SEGMENT && t !== ANY_SEGMENT) return false;
  }
  return true;
}

function parseEntry(text: string): FilterEntry | string {
  if (text === EVERYTHING) return { kind: "subtree", prefix: "" };
  const subtree = text.endsWith(SUBTREE_SUFFIX);
  const body = subtree ? text.slice(0, -SUBTREE_SUFFIX.length) : text;
  const segments = body.split("/");
  const partial = segments.find((segment) => segment !== ANY_SEGMENT && segment.includes("*"));
  if (partial === EVERYTHING) return "'**' may only end a filter (as in a/**)";
  if (partial !== undefined) {
    return `'*' stands for one whole segment, so segment "${partial.slice(0, 40)}" is invalid`;
  }
  if (!segments.includes(ANY_SEGMENT)) {
    const reason = validateTopic(body);
    if (reason !== null) return reason;
    return subtree ? { kind: "subtree", prefix: body } : { kind: "exact", topic: body };
  }
  // Validate the rest as a topic, each `*` replaced by a legal character at the same byte.
  const reason = validateTopic(
    segments.map((segment) => (segment === ANY_SEGMENT ? PLACEHOLDER : segment)).join("/"),
  );
  if (reason !== null) return reason;
  // `*/**` is every topic (each has a first segment): print it as `**`.
  if (subtree && segments.length === 1) return { kind: "subtree", prefix: "" };
  return { kind: "pattern", segments, subtree };
}

function entryText(entry: FilterEntry): string {
  if (entry.kind === "exact") return entry.topic;
  if (entry.kind === "pattern") {
    const body = entry.segments.join("/");
    return entry.subtree ? body + SUBTREE_SUFFIX : body;
  }
  return entry.prefix === "" ? EVERYTHING : entry.prefix + SUBTREE_SUFFIX;
}

function shapeOf(entry: FilterEntry): Shape {
  if (entry.kind === "pattern") return entry;
  if (entry.kind === "exact") return { segments: entry.topic.split("/"), subtree: false };
  return { segments: entry.prefix === "" ? [] : entry.prefix.split("/"), subtree: true };
}

/** True when topic `segments` matches `shape`. */
function shapeMatches(shape: Shape, segments: readonly string[]): boolean {
  const pattern = shape.segments;
  if (shape.subtree ? segments.length < pattern.length : segments.length !== pattern.length) {
    return false;
  }
  for (let i = 0; i < pattern.length; i++) {
    if (pattern[i] !== ANY_SEGMENT && pattern[i] !== segments[i]) return false;
  }
  return true;
}

/** True when the partition of `partition` segments may hold a topic `shape` matches. */
function shapeTouches(shape: Shape, partition: readonly string[]): boolean {
  // A one-segment partition holds that one topic; a full one, every topic starting with it.
  if (partition.length < PARTITION_SEGMENTS) return shapeMatches(shape, partition);
  const pattern = shape.segments;
  if (!shape.subtree && pattern.length < partition.length) return false;
  for (let i = 0; i < Math.min(pattern.length, partition.length); i++) {
    if (pattern[i] !== ANY_SEGMENT && pattern[i] !== partition[i]) return false;
  }
  return true;
}

/**
 * True when every topic `inner` matches also matches `outer`: each of outer's segments is `*`
 * or the same literal in inner, and the lengths fit (a subtree matches any longer topic).
 * Treats a subtree as unbounded in depth, so near the segment limit it may answer a too-careful
 * false (both entries kept), never a wrong true.
 */
function covers(outer: Shape, inner: Shape): boolean {
  const m = outer.segments.length;
  const n = inner.segments.length;
  if (outer.subtree ? n < m : inner.subtree || n !== m) return false;
  for (let i = 0; i < m; i++) {
    const o = outer.segments[i];
    if (o !== ANY_SEGMENT && o !== inner.segments[i]) return false;
  }
  return true;
}

function normalise(entries: FilterEntry[]): FilterEntry[] {
  const shapes = entries.map(shapeOf);
  const kept: FilterEntry[] = [];
  for (let i = 0; i < entries.length; i++) {
    let covered = false;
    for (let j = 0; j < entries.length && !covered; j++) {
      if (i === j || !covers(shapes[j], shapes[i])) continue;
      // Two equal entries cover each other: keep the first.
      covered = !covers(shapes[i], shapes[j]) || j < i;
    }
    if (!covered) kept.push(entries[i]);
  }
  return kept.sort((a, b) =>
    entryText(a) < entryText(b) ? -1 : entryText(a) > entryText(b) ? 1 : 0,
  );
}
