/**
 * The `adaptive` planner: cuts the topic tree where measured volume says so, under a budget of
 * stores. Heavy topics and subtrees get a store of their own; light siblings share stores,
 * folded into the store of the prefix above them or into groups of siblings under it.
 *
 * Objective: the total topic waste, sum over stores of (topics - 1) * bytes, with at most
 * `budget` stores and every store inside one partition. Stores follow the tree (cut_plan.ts): a
 * subtree minus the subtrees cut below it, or a group of sibling subtrees under one prefix.
 * Method: two greedy runs (cut_greedy.ts), keep the one that wastes less:
 *   1. from one store per partition, cut by largest saving until the budget is spent;
 *   2. when the budget allows the heuristic's stores, from the heuristic's cuts, spending only
 *      the budget left over.
 * Run 2 alone already wastes no more than the heuristic (its cuts only ever save waste), so
 * `adaptive` never wastes more than `heuristic` at any budget >= the heuristic's store count:
 * guaranteed by construction, not by luck of the data. Run 1 wins on skewed trees; run 2 wins
 * where the heuristic's groups are already right (equal topics, datasets/even.csv at 2x budget).
 * Budget: at least one store per partition; a smaller request is raised to the partition count
 * and reported (budgetRaisedTo), never an error, so a script asking for "as few as possible" works.
 */
import { assert } from "../stdx/assert.ts";
import { heuristicCuts, rootCuts } from "./cut_plan.ts";
import { greedyCuts, type GreedyCuts } from "./cut_greedy.ts";
import { planProblem, type SplitPlan } from "./plan.ts";
import { buildTopicTree, type TopicTree } from "./topic_tree.ts";
import type { VolumeTable } from "./volume_table.ts";

/** Options of planAdaptive. */
export interface AdaptiveOptions {
  /** Store budget; default: the heuristic's store count. */
  maxStores?: number;
  /** The table's tree, when the caller already built it. */
  tree?: TopicTree;
}

/** Plans `table` by greedy cutting of its topic tree under a store budget. */
export function planAdaptive(table: VolumeTable, options: AdaptiveOptions = {}): SplitPlan {
  const tree = options.tree ?? buildTopicTree(table);
  assert(tree.table === table, "the tree is the table's");
  const baseline = heuristicCuts(tree);
  const baselineRun = greedyCuts(tree, baseline, 0); // budget 0: evaluates the cuts as they are
  const requested = options.maxStores ?? baselineRun.stores;
  assert(Number.isSafeInteger(requested) && requested >= 0, "the budget is a whole number");
  const partitions = tree.partitionRoots.length;
  const budget = Math.max(requested, partitions);
  let best: GreedyCuts = greedyCuts(tree, rootCuts(tree), budget);
  if (baselineRun.stores <= budget) {
    const fromBaseline = greedyCuts(tree, baseline, budget);
    if (fromBaseline.wastedBytes < best.wastedBytes) best = fromBaseline;
  }
  const plan: SplitPlan = {
    algorithm: "adaptive",
    subtrees: best.planSubtreeStores(),
    budget,
    budgetRaisedTo: budget > requested ? budget : null,
  };
  assert(plan.subtrees.length === best.stores, "one store per non-empty region");
  assert(planProblem(table, plan) === null, "the adaptive plan is valid");
  return plan;
}
