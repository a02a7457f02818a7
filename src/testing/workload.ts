/**
 * Workload: what the simulated clients do, drawn from the run's one Prng — a random topic tree
 * with skewed volumes (a few hot topics, a long tail), random filters over it (exact topics,
 * subtrees, everything), random starts (live, earliest, a seq, a time) and payloads of skewed
 * sizes (mostly small, sometimes larger than a tiny tip ring). Pure: no I/O, no clock.
 */
import type { StartPosition } from "../protocol/mod.ts";
import type { Prng } from "../stdx/prng.ts";

const ROOTS = ["app", "sys", "ops", "mkt", "iot", "x"];
const NAMES = ["a", "b", "c", "orders", "trades", "metrics", "logs", "eu", "us", "v1"];

/** Topics of one run, with a cumulative weight table for skewed picks. */
export interface TopicTree {
  topics: string[];
  /** Every proper prefix of a topic (subtree filter roots). */
  prefixes: string[];
  cumulative: number[];
}

/** Builds a random topic tree: 2-4 roots, depth 1-5, each topic weighted ~ 1/rank^1.3. */
export function makeTopicTree(prng: Prng): TopicTree {
  const topics = new Set<string>();
  const prefixes = new Set<string>();
  const roots = 2 + prng.nextInt(3);
  const grow = (path: string, depth: number): void => {
    const children = depth >= 5 ? 0 : prng.nextInt(depth === 1 ? 4 : 3);
    if (children === 0 || prng.nextInt(3) === 0) topics.add(path);
    if (children > 0) prefixes.add(path);
    for (let i = 0; i < children; i++)
      grow(`${path}/${NAMES[prng.nextInt(NAMES.length)]}`, depth + 1);
  };
  for (let i = 0; i < roots; i++) grow(ROOTS[prng.nextInt(ROOTS.length)], 1);
  const list = [...topics].sort();
  // Shuffle, then weight by rank: the first few topics carry most of the volume.
  for (let i = list.length - 1; i > 0; i--) {
    const j = prng.nextInt(i + 1);
    [list[i], list[j]] = [list[j], list[i]];
  }
  const cumulative: number[] = [];
  let total = 0;
  for (let i = 0; i < list.length; i++) cumulative.push((total += 1 / (i + 1) ** 1.3));
  return { topics: list, prefixes: [...prefixes].sort(), cumulative };
}

/** A topic, hot ones more often. */
export function pickTopic(prng: Prng, tree: TopicTree): string {
  const target = prng.nextFloat() * tree.cumulative[tree.cumulative.length - 1];
  let low = 0;
  let high = tree.cumulative.length - 1;
  while (low < high) {
    const middle = (low + high) >> 1;
    if (tree.cumulative[middle] <= target) low = middle + 1;
    else high = middle;
  }
  return tree.topics[low];
}

/** A filter of 1-3 entries: exact topics (any, not only hot ones), subtrees, rarely everything. */
export function makeFilter(prng: Prng, tree: TopicTree): string[] {
  // A quarter of subscribers share a popular filter, so live fan-out serves groups of them.
  if (prng.nextInt(4) === 0)
    return prng.nextInt(2) === 0 || tree.prefixes.length === 0
      ? ["**"]
      : [`${tree.prefixes[0]}/**`];
  const entries = new Set<string>();
  const count = 1 + prng.nextInt(3);
  for (let i = 0; i < count; i++) {
    const roll = prng.nextInt(10);
    if (roll === 0) entries.add("**");
    else if (roll <= 4 && tree.prefixes.length > 0)
      entries.add(`${tree.prefixes[prng.nextInt(tree.prefixes.length)]}/**`);
    else if (roll <= 6) entries.add(pickTopic(prng, tree));
    else entries.add(tree.topics[prng.nextInt(tree.topics.length)]);
  }
  return [...entries];
}

/** A start: live, earliest, a seq around the stream's end or anywhere, or a time in the run. */
export function makeStart(
  prng: Prng,
  context: { nextSeq: number; startUs: number; nowUs: number },
): StartPosition {
  const roll = prng.nextInt(8);
  if (roll <= 1) return { kind: "live" };
  if (roll === 2) return { kind: "earliest" };
  if (roll <= 5) {
    const seq =
      prng.nextInt(2) === 0
        ? 1 + prng.nextInt(context.nextSeq + 3)
        : Math.max(1, context.nextSeq - prng.nextInt(40) + 2);
    return { kind: "seq", seq };
  }
  return {
    kind: "time",
    timeUs: context.startUs + prng.nextInt(Math.max(1, context.nowUs - context.startUs + 1000)),
  };
}

/** A payload tagged `tag` (unique per message) padded with Prng bytes: mostly tiny, sometimes kilobytes. */
export function makePayload(prng: Prng, tag: string): Uint8Array {
  const roll = prng.nextInt(20);
  const extra = roll < 12 ? prng.nextInt(24) : roll < 18 ? prng.nextInt(300) : prng.nextInt(3000);
  const payload = new Uint8Array(tag.length + extra);
  for (let i = 0; i < tag.length; i++) payload[i] = tag.charCodeAt(i);
  prng.fill(payload.subarray(tag.length));
  return payload;
}

/** A payload tagged `tag` of 1-3 KB (a burst of large messages, while a subscriber is stalled). */
export function makeLargePayload(prng: Prng, tag: string): Uint8Array {
  const payload = new Uint8Array(tag.length + 1024 + prng.nextInt(2048));
  for (let i = 0; i < tag.length; i++) payload[i] = tag.charCodeAt(i);
  prng.fill(payload.subarray(tag.length));
  return payload;
}
