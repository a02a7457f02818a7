/**
 * The tree-cut model of a plan: a set of cut nodes of the TopicTree, which always holds every
 * partition root. A topic's store is its leaf's deepest cut ancestor-or-self, so a store is the
 * subtree below its cut node minus the subtrees cut off further down:
 *
 *   cut at app/orders and at app/orders/new/eu:
 *     store app+orders          = app/orders/** except app/orders/new/eu
 *     store app+orders+new+eu   = app/orders/new/eu
 *
 * Since partition roots are cut and every other cut lies below one, a store never mixes
 * partitions. Cut nodes whose subtree is all cut away hold nothing and make no store. The greedy
 * (cut_greedy.ts) grows a cut set and may also split a cut node's children into sibling groups.
 * Owns: the starting cut sets, "one store per partition" and the baseline rule. Pure.
 */
import { SPLIT_HEURISTIC_SEGMENTS } from "../constants.ts";
import { NODE_PREFIX, type TopicTree } from "./topic_tree.ts";

/** Cut flags with only the partition roots set: one store per partition. */
export function rootCuts(tree: TopicTree): Uint8Array {
  const cut = new Uint8Array(tree.nodeCount);
  for (let i = 0; i < tree.partitionRoots.length; i++) cut[tree.partitionRoots[i]] = 1;
  return cut;
}

/**
 * The heuristic rule as cuts: partition roots and every prefix of three segments. A depth-2 root
 * then keeps only the topic of its own name; a shorter topic's root is its own leaf. Gives the
 * same stores as planHeuristic (tested), so adaptive can start from the baseline.
 */
export function heuristicCuts(tree: TopicTree): Uint8Array {
  const cut = rootCuts(tree);
  for (let node = 0; node < tree.nodeCount; node++) {
    if (tree.kind[node] === NODE_PREFIX && tree.depth[node] === SPLIT_HEURISTIC_SEGMENTS)
      cut[node] = 1;
  }
  return cut;
}
