/**
 * The `heuristic` planner: the old rule, kept as the baseline every other planner is measured
 * against. A topic's store is named by its first SPLIT_HEURISTIC_SEGMENTS (three) segments; a topic
 * with fewer segments gets a store of its own. Works on topic names alone (no tree), so it is an
 * independent statement of the published rule; cut_plan.ts states the same rule as tree cuts.
 * Pure; a store never mixes partitions because three segments extend the two of a partition.
 */
import { SPLIT_HEURISTIC_SEGMENTS } from "../constants.ts";
import { assert } from "../stdx/assert.ts";
import { partitionOf } from "../topic/mod.ts";
import { groupPlan, planProblem, type GroupName, type SplitPlan } from "./plan.ts";
import { subtreeStoreIdOf } from "./subtree_store_id.ts";
import type { VolumeTable } from "./volume_table.ts";

/** The prefix naming `topic`'s store: its first three segments, or the whole topic if shorter. */
export function heuristicStoreKey(topic: string): string {
  let slash = -1;
  for (let i = 0; i < SPLIT_HEURISTIC_SEGMENTS; i++) {
    slash = topic.indexOf("/", slash + 1);
    if (slash < 0) return topic;
  }
  return topic.slice(0, slash);
}

/** Plans `table` with the old three-segment rule. */
export function planHeuristic(table: VolumeTable): SplitPlan {
  const groupOfKey = new Map<string, number>();
  const groups: GroupName[] = [];
  const groupOfTopic = new Int32Array(table.topics.length);
  for (let topic = 0; topic < table.topics.length; topic++) {
    const key = heuristicStoreKey(table.topics[topic]);
    let group = groupOfKey.get(key);
    if (group === undefined) {
      group = groups.length;
      groupOfKey.set(key, group);
      groups.push({ id: subtreeStoreIdOf(key, false), partition: partitionOf(key) });
    }
    groupOfTopic[topic] = group;
  }
  const plan: SplitPlan = {
    algorithm: "heuristic",
    subtrees: groupPlan(table, groupOfTopic, groups),
    budget: null,
    budgetRaisedTo: null,
  };
  assert(planProblem(table, plan) === null, "the heuristic plan is valid");
  return plan;
}
