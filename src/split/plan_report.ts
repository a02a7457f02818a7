/**
 * Plan reports: one call that plans a table with a named algorithm and measures the result, and
 * the JSON document `aria split plan --json` prints (its shape is a published contract:
 * {"algorithm", "stores": [{"id", "partition", "topics", "bytes"}], "metrics": {...}}, with the
 * budget fields and subtree metrics as additions). Pure: the CLI reads files and prints.
 */
import { planAdaptive } from "./adaptive.ts";
import { planHeuristic } from "./heuristic.ts";
import { planMetrics, type PlanMetrics } from "./metrics.ts";
import type { SplitAlgorithm, SplitPlan } from "./plan.ts";
import { buildTopicTree } from "./topic_tree.ts";
import type { VolumeTable } from "./volume_table.ts";

/** A plan with its metrics. */
export interface PlanReport {
  readonly plan: SplitPlan;
  readonly metrics: PlanMetrics;
  readonly partitions: number;
}

/** Plans `table` with `algorithm` (adaptive under `maxStores`, default the heuristic's count). */
export function planSplit(
  table: VolumeTable,
  options: { algorithm: SplitAlgorithm; maxStores?: number },
): PlanReport {
  const tree = buildTopicTree(table);
  const plan =
    options.algorithm === "heuristic"
      ? planHeuristic(table)
      : planAdaptive(table, { maxStores: options.maxStores, tree });
  return {
    plan,
    metrics: planMetrics(table, plan, { tree }),
    partitions: tree.partitionRoots.length,
  };
}

/** The JSON document of a report: every topic of the table listed in exactly one store. */
export function planJson(table: VolumeTable, report: PlanReport): unknown {
  const { plan, metrics } = report;
  return {
    algorithm: plan.algorithm,
    ...(plan.budget === null ? {} : { budget: plan.budget }),
    ...(plan.budgetRaisedTo === null ? {} : { budgetRaisedTo: plan.budgetRaisedTo }),
    stores: plan.subtrees.map((store) => ({
      id: store.id,
      partition: store.partition,
      topics: Array.from(store.topics, (topic) => table.topics[topic]),
      bytes: store.bytes,
    })),
    metrics,
  };
}
