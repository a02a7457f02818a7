/** split: volume tables, the pure split planners (heuristic, adaptive) and plan metrics. */
export {
  parseVolumeTable,
  volumeTableOf,
  VOLUME_TABLE_HEADER,
  type VolumeRow,
  type VolumeTable,
  type VolumeTableResult,
} from "./volume_table.ts";
export {
  SPLIT_ALGORITHMS,
  planProblem,
  type PlannedSubtreeStore,
  type SplitAlgorithm,
  type SplitPlan,
} from "./plan.ts";
export { heuristicStoreKey, planHeuristic } from "./heuristic.ts";
export { planAdaptive, type AdaptiveOptions } from "./adaptive.ts";
export {
  planMetrics,
  subtreeReadBytes,
  topicWaste,
  type MetricsOptions,
  type PlanMetrics,
} from "./metrics.ts";
export { buildTopicTree, type TopicTree } from "./topic_tree.ts";
export { subtreeStoreIdOf } from "./subtree_store_id.ts";
export { planSplit, planJson, type PlanReport } from "./plan_report.ts";
