/**
 * Plan metrics: how many bytes a plan makes subscribers read and throw away. Works for any valid
 * plan of any planner.
 *
 * Topic reads: reading topic t reads its whole store, so waste(t) = bytes(store of t) - bytes(t).
 * Reported: the sum over topics, the topic with the most waste, the topic with the worst ratio
 * bytes(store) / bytes(t), and the store count.
 * Subtree reads: reading `p/**` reads every store holding any topic under p, so
 * waste(p) = sum of those stores' bytes - bytes under p; the same three figures over every prefix
 * p of a topic (`app/**`, `app/orders/**`, ..., a topic with nothing below it counts as its own
 * subtree). Ratios divide by at least one byte, so a topic of 0 bytes has a finite ratio: the
 * bytes read per wanted byte, counting at least one wanted. Ties go to the first in table order.
 * Sums are float64: exact while below 2^53 bytes.
 */
import { assert } from "../stdx/assert.ts";
import type { SplitPlan } from "./plan.ts";
import { buildTopicTree, NODE_PREFIX, type TopicTree } from "./topic_tree.ts";
import type { VolumeTable } from "./volume_table.ts";

/** The figures of one plan. */
export interface PlanMetrics {
  stores: number;
  wastedBytesTotal: number;
  worstWaste: { topic: string; wastedBytes: number };
  worstRatio: { topic: string; ratio: number };
  subtrees: {
    count: number;
    wastedBytesTotal: number;
    worstWaste: { subtree: string; wastedBytes: number };
    worstRatio: { subtree: string; ratio: number };
  };
}

/** Options of planMetrics. */
export interface MetricsOptions {
  /** The table's tree, when the caller already built it. */
  tree?: TopicTree;
}

/** waste(t) for every topic of the table, in table order. */
export function topicWaste(table: VolumeTable, plan: SplitPlan): Float64Array {
  const waste = new Float64Array(table.topics.length).fill(-1);
  for (const store of plan.subtrees) {
    for (let i = 0; i < store.topics.length; i++)
      waste[store.topics[i]] = store.bytes - table.bytes[store.topics[i]];
  }
  assert(
    waste.every((value) => value >= 0),
    "every topic is in a store",
  );
  return waste;
}

/** Bytes read by a subscriber to each prefix node's subtree (0 for SELF nodes). */
export function subtreeReadBytes(tree: TopicTree, plan: SplitPlan): Float64Array {
  const read = new Float64Array(tree.nodeCount);
  const stamp = new Int32Array(tree.nodeCount).fill(-1);
  for (let index = 0; index < plan.subtrees.length; index++) {
    const store = plan.subtrees[index];
    for (let i = 0; i < store.topics.length; i++) {
      // Climb until a prefix this store already counted: its ancestors are counted too.
      for (
        let node = tree.nodeOfTopic[store.topics[i]];
        node >= 0 && stamp[node] !== index;
        node = tree.parent[node]
      ) {
        stamp[node] = index;
        read[node] += store.bytes;
      }
    }
  }
  return read;
}

/** Computes the topic and subtree metrics of `plan`. */
export function planMetrics(
  table: VolumeTable,
  plan: SplitPlan,
  options: MetricsOptions = {},
): PlanMetrics {
  const tree = options.tree ?? buildTopicTree(table);
  assert(tree.table === table, "the tree is the table's");
  const waste = topicWaste(table, plan);
  let total = 0;
  let worst = 0;
  let worstRatio = 0;
  for (let topic = 0; topic < waste.length; topic++) {
    total += waste[topic];
    if (waste[topic] > waste[worst]) worst = topic;
    if (
      ratio(waste[topic] + table.bytes[topic], table.bytes[topic]) >
      ratio(waste[worstRatio] + table.bytes[worstRatio], table.bytes[worstRatio])
    ) {
      worstRatio = topic;
    }
  }
  const read = subtreeReadBytes(tree, plan);
  let count = 0;
  let subtreeTotal = 0;
  let subtreeWorst = -1;
  let subtreeWorstRatio = -1;
  for (let node = 0; node < tree.nodeCount; node++) {
    if (tree.kind[node] !== NODE_PREFIX) continue;
    count++;
    const wasted = read[node] - tree.bytes[node];
    subtreeTotal += wasted;
    if (subtreeWorst < 0 || wasted > read[subtreeWorst] - tree.bytes[subtreeWorst])
      subtreeWorst = node;
    if (
      subtreeWorstRatio < 0 ||
      ratio(read[node], tree.bytes[node]) >
        ratio(read[subtreeWorstRatio], tree.bytes[subtreeWorstRatio])
    ) {
      subtreeWorstRatio = node;
    }
  }
  return {
    stores: plan.subtrees.length,
    wastedBytesTotal: total,
    worstWaste: { topic: table.topics[worst], wastedBytes: waste[worst] },
    worstRatio: {
      topic: table.topics[worstRatio],
      ratio: ratio(waste[worstRatio] + table.bytes[worstRatio], table.bytes[worstRatio]),
    },
    subtrees: {
      count,
      wastedBytesTotal: subtreeTotal,
      worstWaste: {
        subtree: `${tree.path[subtreeWorst]}/**`,
        wastedBytes: read[subtreeWorst] - tree.bytes[subtreeWorst],
      },
      worstRatio: {
        subtree: `${tree.path[subtreeWorstRatio]}/**`,
        ratio: ratio(read[subtreeWorstRatio], tree.bytes[subtreeWorstRatio]),
      },
    },
  };
}

function ratio(read: number, wanted: number): number {
  return read / Math.max(wanted, 1);
}
