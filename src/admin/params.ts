/**
 * Query parameters of the admin API, checked into typed values or a reason (the 400 body).
 * Unknown parameters are refused, so a typo (`max_stores`) is an error, not a silent default.
 * Pure.
 */
import { ADMIN_TREE_DEPTH_MAX } from "../constants.ts";
import { SPLIT_ALGORITHMS, type SplitAlgorithm } from "../split/mod.ts";
import { Filter, validateTopic } from "../topic/mod.ts";
import { VOLUME_SOURCES, type VolumeSource } from "./ports.ts";

/** A parsed value, or why the request is bad. */
export type Parsed<T> = { ok: true; value: T } | { ok: false; reason: string };

/** Query parameters as the framework hands them (the first value of each name). */
export type Query = Readonly<Record<string, string>>;

/** Parameters of GET /api/topics: a tree below `prefix`, or with `filter` the topics it matches. */
export interface TopicsParams {
  source: VolumeSource;
  prefix: string;
  depth: number;
  /** One filter entry (a pattern with `*`, a subtree): a flat list of matching topics, no tree. */
  filter: Filter | null;
}

/** Parameters of the split plan routes. */
export interface PlanParams {
  source: VolumeSource;
  algorithm: SplitAlgorithm;
  maxStores: number | undefined;
}

/** Parameters of the split compare routes (both algorithms). */
export interface CompareParams {
  source: VolumeSource;
  maxStores: number | undefined;
}

/** Checks the parameters of GET /api/topics. */
export function topicsParams(query: Query): Parsed<TopicsParams> {
  const unknown = unknownParameter(query, ["source", "prefix", "depth", "filter"]);
  if (unknown !== null) return bad(unknown);
  // The topic browser shows what the data directory holds (the same after a restart).
  const source = sourceOf(query, "persisted");
  if (!source.ok) return source;
  let filter: Filter | null = null;
  if (query.filter !== undefined) {
    if (query.prefix !== undefined || query.depth !== undefined)
      return bad("filter lists matching topics: it takes no prefix or depth");
    const parsed = Filter.parse([query.filter]);
    if (!parsed.ok)
      return bad(`filter ${JSON.stringify(query.filter.slice(0, 300))}: ${parsed.reason}`);
    filter = parsed.filter;
  }
  const prefix = query.prefix ?? "";
  if (prefix !== "") {
    const invalid = validateTopic(prefix);
    if (invalid !== null) return bad(`prefix ${JSON.stringify(prefix.slice(0, 300))}: ${invalid}`);
  }
  const depth = wholeOf(query.depth, "depth", { min: 0, max: ADMIN_TREE_DEPTH_MAX, missing: 1 });
  if (!depth.ok) return depth;
  return { ok: true, value: { source: source.value, prefix, depth: depth.value, filter } };
}

/** Checks the parameters of the split plan routes; `withSource` is false for an uploaded table. */
export function planParams(query: Query, withSource: boolean): Parsed<PlanParams> {
  const unknown = unknownParameter(
    query,
    withSource ? ["source", "algorithm", "maxStores"] : ["algorithm", "maxStores"],
  );
  if (unknown !== null) return bad(unknown);
  const source = sourceOf(query);
  if (!source.ok) return source;
  const algorithm = query.algorithm;
  if (algorithm === undefined || algorithm === "")
    return bad(`algorithm is required (${SPLIT_ALGORITHMS.join(" or ")})`);
  if (!SPLIT_ALGORITHMS.includes(algorithm as SplitAlgorithm))
    return bad(
      `algorithm ${JSON.stringify(algorithm.slice(0, 40))} is not ${SPLIT_ALGORITHMS.join(" or ")}`,
    );
  if (query.maxStores !== undefined && algorithm !== "adaptive")
    return bad("maxStores applies to algorithm adaptive only");
  const maxStores = maxStoresOf(query);
  if (!maxStores.ok) return maxStores;
  return {
    ok: true,
    value: {
      source: source.value,
      algorithm: algorithm as SplitAlgorithm,
      maxStores: maxStores.value,
    },
  };
}

/** Checks the parameters of the split compare routes. */
export function compareParams(query: Query, withSource: boolean): Parsed<CompareParams> {
  const unknown = unknownParameter(query, withSource ? ["source", "maxStores"] : ["maxStores"]);
  if (unknown !== null) return bad(unknown);
  const source = sourceOf(query);
  if (!source.ok) return source;
  const maxStores = maxStoresOf(query);
  if (!maxStores.ok) return maxStores;
  return { ok: true, value: { source: source.value, maxStores: maxStores.value } };
}

function bad<T>(reason: string): Parsed<T> {
  return { ok: false, reason };
}

function unknownParameter(query: Query, known: readonly string[]): string | null {
  for (const name of Object.keys(query)) {
    if (!known.includes(name))
      return `unknown parameter ${JSON.stringify(name.slice(0, 40))} (expected ${known.join(", ")})`;
  }
  return null;
}

function sourceOf(query: Query, fallback: VolumeSource = "live"): Parsed<VolumeSource> {
  const source = query.source ?? fallback;
  if (!VOLUME_SOURCES.includes(source as VolumeSource))
    return bad(
      `source ${JSON.stringify(source.slice(0, 40))} is not ${VOLUME_SOURCES.join(" or ")}`,
    );
  return { ok: true, value: source as VolumeSource };
}

function maxStoresOf(query: Query): Parsed<number | undefined> {
  if (query.maxStores === undefined || query.maxStores === "")
    return { ok: true, value: undefined };
  return wholeOf(query.maxStores, "maxStores", {
    min: 1,
    max: Number.MAX_SAFE_INTEGER,
    missing: 1,
  });
}

function wholeOf(
  text: string | undefined,
  name: string,
  limits: { min: number; max: number; missing: number },
): Parsed<number> {
  if (text === undefined) return { ok: true, value: limits.missing };
  if (!/^\d{1,16}$/.test(text))
    return bad(`${name} ${JSON.stringify(text.slice(0, 40))} is not a whole number`);
  const value = Number(text);
  if (value < limits.min || value > limits.max)
    return bad(`${name} ${value} is not between ${limits.min} and ${limits.max}`);
  return { ok: true, value };
}
