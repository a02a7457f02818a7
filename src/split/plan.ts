/**
 * SplitPlan: which topics go to which subtree store — what every planner returns and the metrics
 * and the split executor read.
 *
 * Owns the plan types, building a plan from a store per topic (`groupPlan`) and the check of a
 * plan's invariants (`planProblem`): every topic of the table is in exactly one store; a store
 * never mixes partitions; a store's bytes are the sum of its topics' bytes; ids are unique and
 * file-name safe. Stores are ordered by id, topics inside a store by table order (ascending).
 */
import { SPLIT_STORE_ID_BYTES_MAX } from "../constants.ts";
import { isUnder, partitionOf } from "../topic/mod.ts";
import type { VolumeTable } from "./volume_table.ts";

/** The planners Aria ships. */
export type SplitAlgorithm = "heuristic" | "adaptive";

/** Every SplitAlgorithm, in the order usage texts list them. */
export const SPLIT_ALGORITHMS: readonly SplitAlgorithm[] = ["heuristic", "adaptive"];

/** One subtree store of a plan. */
export interface PlannedSubtreeStore {
  readonly id: string;
  readonly partition: string;
  /** Indexes into the table's topics, ascending. */
  readonly topics: Int32Array;
  readonly bytes: number;
}

/** A split plan and the budget it was made under. */
export interface SplitPlan {
  readonly algorithm: SplitAlgorithm;
  readonly subtrees: readonly PlannedSubtreeStore[];
  /** The store budget the planner worked under, null for a planner without one (heuristic). */
  readonly budget: number | null;
  /** Set when the requested budget was below the partition count and was raised to it. */
  readonly budgetRaisedTo: number | null;
}

/** What groupPlan needs to know about each group. */
export interface GroupName {
  /** The id before de-duplication (see subtreeStoreIdOf). */
  id: string;
  partition: string;
}

/** Builds the stores of a plan from `groupOfTopic` (a group index per topic) and the groups' names. */
export function groupPlan(
  table: VolumeTable,
  groupOfTopic: Int32Array,
  groups: readonly GroupName[],
): PlannedSubtreeStore[] {
  const groupCount = groups.length;
  const sizes = new Int32Array(groupCount);
  const bytes = new Float64Array(groupCount);
  for (let topic = 0; topic < groupOfTopic.length; topic++) {
    sizes[groupOfTopic[topic]]++;
    bytes[groupOfTopic[topic]] += table.bytes[topic];
  }
  // One backing array, grouped by a counting sort; each store views its slice.
  const starts = new Int32Array(groupCount + 1);
  for (let group = 0; group < groupCount; group++) starts[group + 1] = starts[group] + sizes[group];
  const members = new Int32Array(groupOfTopic.length);
  const filled = starts.slice(0, groupCount);
  for (let topic = 0; topic < groupOfTopic.length; topic++)
    members[filled[groupOfTopic[topic]]++] = topic;
  const stores: PlannedSubtreeStore[] = [];
  for (let group = 0; group < groupCount; group++) {
    if (sizes[group] === 0) continue;
    const topics = members.subarray(starts[group], starts[group + 1]);
    stores.push({
      id: groups[group].id,
      partition: groups[group].partition,
      topics,
      bytes: bytes[group],
    });
  }
  stores.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : a.topics[0] - b.topics[0]));
  // Ids collide only when two long prefixes share a hash (subtreeStoreIdOf): number the later ones.
  // Sorted, so equal ids are neighbours.
  let runId = "";
  let times = 0;
  for (let index = 0; index < stores.length; index++) {
    const id = stores[index].id;
    times = id === runId ? times + 1 : 1;
    runId = id;
    if (times > 1) stores[index] = { ...stores[index], id: `${id}~~${times}` };
  }
  return stores;
}

const ID_PATTERN = /^[A-Za-z0-9._%+=~-]+$/;

/** Null when `plan` is a valid plan of `table`, else the first broken invariant. */
export function planProblem(table: VolumeTable, plan: SplitPlan): string | null {
  const subtreeOfTopic = new Int32Array(table.topics.length).fill(-1);
  const ids = new Set<string>();
  for (let index = 0; index < plan.subtrees.length; index++) {
    const store = plan.subtrees[index];
    if (
      !ID_PATTERN.test(store.id) ||
      store.id.startsWith(".") ||
      store.id.length > SPLIT_STORE_ID_BYTES_MAX + 16
    ) {
      return `store "${store.id}": id is not file-name safe`;
    }
    if (ids.has(store.id)) return `store "${store.id}": id used twice`;
    ids.add(store.id);
    if (store.topics.length === 0) return `store "${store.id}": no topics`;
    if (partitionOf(store.partition) !== store.partition)
      return `store "${store.id}": "${store.partition}" is not a partition`;
    // partitionOf(topic) === partition, without slicing every topic: a two-segment partition holds
    // the topics under it, a one-segment partition only the topic of its name.
    const exact = store.partition.indexOf("/") < 0;
    let bytes = 0;
    for (let i = 0; i < store.topics.length; i++) {
      const topic = store.topics[i];
      if (!(topic >= 0 && topic < table.topics.length))
        return `store "${store.id}": topic index ${topic} out of range`;
      if (subtreeOfTopic[topic] >= 0) return `topic "${table.topics[topic]}" is in two stores`;
      subtreeOfTopic[topic] = index;
      if (
        exact
          ? table.topics[topic] !== store.partition
          : !isUnder(table.topics[topic], store.partition)
      ) {
        return `store "${store.id}" of partition "${store.partition}" holds "${table.topics[topic]}"`;
      }
      bytes += table.bytes[topic];
    }
    if (bytes !== store.bytes)
      return `store "${store.id}": bytes ${store.bytes}, its topics sum to ${bytes}`;
  }
  const missing = subtreeOfTopic.indexOf(-1);
  if (missing >= 0) return `topic "${table.topics[missing]}" is in no store`;
  if (plan.budget !== null && plan.subtrees.length > plan.budget)
    return `${plan.subtrees.length} stores, over the budget of ${plan.budget}`;
  return null;
}
