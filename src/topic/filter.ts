/**
 * Filters: a set of exact topics (`a/b/c`) and subtrees (`a/b/**`: `a/b` and everything below;
 * `**`: everything). Parsing validates and normalises: an entry covered by another is dropped,
 * so a message matching several entries is still delivered once, and equal filters print equally.
 * Pure: no interning here (see filter_matcher.ts for matching by topic id).
 */
import { FILTER_ENTRIES_MAX } from "../constants.ts";
import { foreignFilterAdvice } from "./foreign_syntax.ts";
import { isUnder, partitionOf, validateTopic } from "./topic.ts";

const SUBTREE_SUFFIX = "/**";
const EVERYTHING = "**";

/** One entry of a filter. `prefix` is "" for `**`. */
export type FilterEntry =
  | { readonly kind: "exact"; readonly topic: string }
  | { readonly kind: "subtree"; readonly prefix: string };

/** The result of parsing a filter: the filter, or the reason it is invalid. */
export type FilterParse = { ok: true; filter: Filter } | { ok: false; reason: string };

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

  private constructor(readonly entries: readonly FilterEntry[]) {
    for (const entry of entries) {
      const text = entry.kind === "exact" ? entry.topic : entry.prefix;
      (entry.kind === "exact" ? this.exact : this.subtrees).add(text);
      if (entry.kind === "subtree" && text.indexOf("/") < 0) this.spanning.add(text);
      else this.partitions.add(partitionOf(text));
    }
  }

  /** Parses filter strings such as `a/b/c`, `a/b/**` and `**`. */
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

  /** True when the topic `name` matches some entry: one set lookup per segment. */
  matches(name: string): boolean {
    if (this.exact.has(name) || this.subtrees.has("")) return true;
    if (this.subtrees.size === 0) return false;
    for (let slash = name.indexOf("/"); slash >= 0; slash = name.indexOf("/", slash + 1)) {
      if (this.subtrees.has(name.slice(0, slash))) return true;
    }
    return this.subtrees.has(name);
  }

  /** True when the partition `partition` may hold topics that match. */
  touchesPartition(partition: string): boolean {
    if (this.partitions.has(partition) || this.spanning.has("")) return true;
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
}

function parseEntry(text: string): FilterEntry | string {
  if (text === EVERYTHING) return { kind: "subtree", prefix: "" };
  if (text.endsWith(SUBTREE_SUFFIX)) {
    const prefix = text.slice(0, -SUBTREE_SUFFIX.length);
    const reason = validateTopic(prefix);
    return reason === null ? { kind: "subtree", prefix } : reason;
  }
  return validateTopic(text) ?? { kind: "exact", topic: text };
}

function entryText(entry: FilterEntry): string {
  if (entry.kind === "exact") return entry.topic;
  return entry.prefix === "" ? EVERYTHING : entry.prefix + SUBTREE_SUFFIX;
}

function covers(outer: FilterEntry, inner: FilterEntry): boolean {
  if (outer.kind === "exact") return inner.kind === "exact" && inner.topic === outer.topic;
  return isUnder(inner.kind === "exact" ? inner.topic : inner.prefix, outer.prefix);
}

function normalise(entries: FilterEntry[]): FilterEntry[] {
  const kept: FilterEntry[] = [];
  for (let i = 0; i < entries.length; i++) {
    let covered = false;
    for (let j = 0; j < entries.length && !covered; j++) {
      if (i === j || !covers(entries[j], entries[i])) continue;
      // Two equal entries cover each other: keep the first.
      covered = !covers(entries[i], entries[j]) || j < i;
    }
    if (!covered) kept.push(entries[i]);
  }
  return kept.sort((a, b) =>
    entryText(a) < entryText(b) ? -1 : entryText(a) > entryText(b) ? 1 : 0,
  );
}
